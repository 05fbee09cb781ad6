// TorchRandperm: the order torch.randperm(n, generator=g) gives on the CPU,
// bit for bit, without torch and without a Python list, produced while it is
// read.
//
// torch's CPU generator is a Mersenne Twister (MT19937, ATen's
// mt19937_engine: seeded as std::mt19937 is; `random()` is one 32-bit
// draw, `random64()` two, the first the high word).  Its randperm is, for n
// below 2^32 / 20, a forward Fisher-Yates: at step i it swaps position i with
// i + random() % (n - i), so position i is final after step i and an epoch's
// first batch can go out as soon as its positions are drawn.  From 2^32 / 20
// up it is the inside-out variant with random64() % (i + 1), whose positions
// are final only at the end.
//
// A background thread, started by the first read, draws the permutation, at
// most kAhead positions past the furthest one read (so an epoch's draw is
// spread over the epoch instead of taking a core from the workers at its
// start); Read waits for the positions it asks for.  The permutation is held as 32-bit words in anonymous memory
// that is never written before it is touched (a word w != 0 holds w - 1,
// 0 means "still its own index"), so nothing is filled up front.
//
// A resumed epoch promises not to read its consumed start (NotBefore(F)).
// The forward draw must still make every step below F, but of those steps
// only what each moves forward matters: position i < F is never read, so
// step i need not fetch what it takes from i + z, only put position i's
// content there.  Below F the cursor's window of 2^16 places is dense and in
// the cache: a move inside it is made at once, one to a later window is
// appended to that window's log, read when the cursor reaches it.  A move
// to a place at or past F is appended, in step order, to one log per span
// of places, and each span's log is written out at F while the span sits
// in the cache.  The random swaps of a large array (two cache misses a
// step) become sequential appends, and the array below F is never touched.
#ifndef STOKER_ORDER_TORCH_RANDPERM_H_
#define STOKER_ORDER_TORCH_RANDPERM_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "order/index_order.h"

namespace stoker {

// ATen's mt19937_engine state, as torch.Generator.get_state() carries it.
struct TorchMT19937 {
  static constexpr int kN = 624, kM = 397;
  uint32_t state[kN];
  int left = 1;       // draws before the next twist, plus one
  uint32_t next = 0;  // index of the next word

  static TorchMT19937 Seeded(uint64_t seed);
  uint32_t operator()() {
    if (--left == 0) Twist();
    uint32_t y = state[next++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
  }
  uint64_t Random64() {
    const uint64_t hi = (*this)();
    return (hi << 32) | (*this)();
  }

 private:
  void Twist();
};

// The n at and above which torch draws the inside-out variant.
inline constexpr uint64_t kTorchRandpermLargeN = 0xffffffffull / 20;

class TorchRandperm : public IndexOrder {
 public:
  // The first `count` (<= n) positions of randperm(n) drawn from `gen`; after
  // it, `extra_perms` more randperm(n) are drawn and thrown away (as
  // RandomSampler's last, empty slice does), so that final_state() is the
  // generator's state after everything torch would have drawn.
  TorchRandperm(uint64_t n, uint64_t count, const TorchMT19937& gen, int extra_perms = 0);
  ~TorchRandperm() override;
  uint64_t size() const override { return count_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // (before the first Read: a forward draw then skips to `place`; a read
  // below it is refused)
  void NotBefore(uint64_t place) override;
  // Waits for the draw; the generator's state after it: after the
  // permutation only, or after the extra permutations too (`with_extra`).
  TorchMT19937 final_state(bool with_extra = true);
  // Positions final so far.
  uint64_t drawn() const { return done_.load(std::memory_order_acquire); }
  // How far past the furthest position read the drawing runs ahead.
  static constexpr uint64_t kAhead = uint64_t{1} << 21;
  void Stop();

 private:
  // Starts the drawing thread (once): `need`, the positions the first read
  // (or final_state) waits for, chooses the array's pages.
  void Start(uint64_t need);
  void Run();
  // The forward draw's steps below floor_ (see above), its logs in log_;
  // `ring` holds the places of steps [0, kLook), after it those of
  // [floor_, floor_ + kLook).  False when stopped.
  bool SkipToFloor(uint64_t* ring);
  // Each step swaps with a random place of a large array: a cache and TLB
  // miss.  The draws do not depend on the array, so they are made kLook
  // steps ahead, in the same order, and their places prefetched: the misses
  // overlap instead of following one another.
  static constexpr uint64_t kLook = 32;
  uint32_t At(uint64_t k) const {
    const uint32_t w = words_[k];
    return w ? w - 1 : static_cast<uint32_t>(k);
  }
  void Set(uint64_t k, uint64_t v) { words_[k] = static_cast<uint32_t>(v + 1); }
  void Publish(uint64_t done);
  // The drawing thread, at position `done`: waits while it is kAhead past
  // the furthest read (unless the whole draw is wanted).
  void Pace(uint64_t done);

  uint64_t n_, count_;
  int extra_;
  TorchMT19937 gen_;
  TorchMT19937 after_order_;  // (under mu_ once finished_) before the extra permutations
  uint32_t* words_ = nullptr;
  size_t bytes_ = 0;
  std::atomic<uint64_t> done_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> wanted_{0};    // the furthest position read, plus one
  std::atomic<bool> all_wanted_{false};  // final_state() waits: draw to the end
  std::atomic<bool> pacing_{false};      // the drawing thread waits in Pace
  std::atomic<bool> started_flag_{false};
  uint64_t asked_floor_ = 0;  // NotBefore's
  uint64_t floor_ = 0;        // (fixed by Start) places below it are not kept
  uint64_t* log_ = nullptr;   // (floor_ > 0) the logs' blocks
  size_t log_bytes_ = 0;
  bool finished_ = false;  // (under mu_) the extra permutations too
  std::mutex mu_;
  std::condition_variable cv_;
  std::once_flag started_;
  std::thread thread_;
  pid_t thread_pid_ = 0;  // the process that started it
};

}  // namespace stoker

#endif  // STOKER_ORDER_TORCH_RANDPERM_H_
