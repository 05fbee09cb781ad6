// Micro-benchmarks of the shared-memory primitives (Google Benchmark):
// ring push/pop, and a full cross-thread doorbell round trip.
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <thread>

#include "sync/doorbell.h"
#include "sync/spsc_ring.h"

namespace stoker {

static void BM_RingPushPop(benchmark::State& state) {
  auto l = std::make_unique<RingLayout>();
  SpscRing r(l.get());
  uint64_t v = 0;
  for (auto _ : state) {
    r.TryPush(v);
    r.TryPop(&v);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_RingPushPop);

// Ping-pong between two threads through two rings and doorbells.
static void BM_RingRoundTrip(benchmark::State& state) {
  auto ping = std::make_unique<RingLayout>(), pong = std::make_unique<RingLayout>();
  DoorbellLayout ping_bell{}, pong_bell{};
  std::atomic<bool> stop{false};
  std::thread peer([&] {
    SpscRing in(ping.get()), out(pong.get());
    Doorbell bell(&ping_bell), back(&pong_bell);
    uint64_t v;
    while (!stop.load()) {
      if (!bell.WaitUntil([&] { return !in.Empty() || stop.load(); }, -1)) continue;
      while (in.TryPop(&v)) {
        out.TryPush(v);
        back.Ring();
      }
    }
  });
  SpscRing out(ping.get()), in(pong.get());
  Doorbell bell(&pong_bell), fwd(&ping_bell);
  uint64_t v = 0;
  for (auto _ : state) {
    out.TryPush(v);
    fwd.Ring();
    bell.WaitUntil([&] { return !in.Empty(); }, -1);
    in.TryPop(&v);
  }
  stop.store(true);
  fwd.Ring();
  peer.join();
}
BENCHMARK(BM_RingRoundTrip)->UseRealTime();

}  // namespace stoker

BENCHMARK_MAIN();
