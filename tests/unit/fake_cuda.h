// A stand-in for the CUDA runtime's entry points (loader/cuda_host.h), for
// testing pinning and fences on a machine with no GPU.  The "GPU" finishes
// recorded events in order when the test says so (FinishUpTo), or when one
// is waited for (event_synchronize finishes everything recorded up to it).
#ifndef STOKER_TESTS_UNIT_FAKE_CUDA_H_
#define STOKER_TESTS_UNIT_FAKE_CUDA_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "loader/cuda_host.h"

namespace stoker::testing {

struct FakeCuda {
  struct Event {
    uint64_t order = 0;  // record order (0: never recorded)
    bool done = false;
    bool destroyed = false;
  };
  std::vector<Event> events;  // an event handle is its index + 1
  uint64_t records = 0;
  int query_error = 0;        // returned by event_query instead of the state, when set
  int record_error = 0;       // returned by event_record, when set
  int register_error = 0;     // returned by host_register, when set
  std::vector<std::pair<void*, size_t>> registered;  // every call, in order
  std::vector<void*> unregistered;
  std::map<void*, size_t> live;  // registered now
  int synchronizes = 0;
  bool blocking = false;          // the test's "GIL released" state (Scheduler blocking hooks)
  int synchronizes_holding = 0;   // waits for the GPU made while not blocking
  int last_error = 0;   // as the runtime's: set by a call that fails, reset by get_last_error
  int cleared = 0;      // get_last_error calls that found an error

  static FakeCuda& Get() {
    static FakeCuda f;
    return f;
  }
  static void Reset() { Get() = FakeCuda(); }
  static Event& At(void* e) { return Get().events[reinterpret_cast<uintptr_t>(e) - 1]; }

  // Completes every event recorded n-th or earlier.
  static void FinishUpTo(uint64_t n) {
    for (Event& e : Get().events)
      if (e.order && e.order <= n) e.done = true;
  }
  static size_t Live() {
    size_t n = 0;
    for (const Event& e : Get().events) n += !e.destroyed;
    return n;
  }

  static int Fail(int err) {
    Get().last_error = err;
    return err;
  }

  static CudaRuntimeApi Api() {
    CudaRuntimeApi a;
    a.host_register = [](void* p, size_t n, unsigned) {
      if (Get().register_error) return Fail(Get().register_error);
      Get().registered.emplace_back(p, n);
      Get().live[p] = n;
      return 0;
    };
    a.host_unregister = [](void* p) {
      Get().unregistered.push_back(p);
      Get().live.erase(p);
      return 0;
    };
    a.event_create_with_flags = [](void** e, unsigned) {
      Get().events.emplace_back();
      *e = reinterpret_cast<void*>(static_cast<uintptr_t>(Get().events.size()));
      return 0;
    };
    a.event_record = [](void* e, void*) {
      if (Get().record_error) return Fail(Get().record_error);
      At(e).order = ++Get().records;
      At(e).done = false;
      return 0;
    };
    a.event_query = [](void* e) {
      if (Get().query_error) return Fail(Get().query_error);
      return At(e).done ? 0 : Fail(kCudaErrorNotReady);
    };
    a.event_synchronize = [](void* e) {
      ++Get().synchronizes;
      Get().synchronizes_holding += !Get().blocking;
      FinishUpTo(At(e).order);
      return 0;
    };
    a.event_destroy = [](void* e) {
      At(e).destroyed = true;
      return 0;
    };
    a.get_last_error = [] {
      const int err = Get().last_error;
      Get().last_error = 0;
      Get().cleared += err != 0;
      return err;
    };
    return a;
  }
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_UNIT_FAKE_CUDA_H_
