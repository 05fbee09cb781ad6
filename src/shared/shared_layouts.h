// Shared-memory layouts of the stoker.shared primitives (plain structs; one
// SharedBlock each).  Every process maps them at its own address: nothing
// in them is a pointer.
#ifndef STOKER_SHARED_SHARED_LAYOUTS_H_
#define STOKER_SHARED_SHARED_LAYOUTS_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace stoker {

inline constexpr uint64_t kLockMagic = 0x314B434F4C4B5453ull;     // "STKLOCK1"
inline constexpr uint64_t kCounterMagic = 0x31544E434B4B5453ull;  // "STKKCNT1"
inline constexpr uint64_t kBagMagic = 0x3147414242545353ull;      // "SSTBBAG1"

struct LockLayout {
  uint64_t magic;
  pthread_mutex_t mutex;               // process-shared, robust, recursive
  std::atomic<uint64_t> owner_deaths;  // holders that died holding it
};

struct CounterLayout {
  uint64_t magic;
  std::atomic<int64_t> value;
};

// BagSampler block:
//   BagSamplerHeader
//   BagState bags[num_bags]            (at bags_at)
//   double   weights[total]            (at weights_at; bag i from bags[i].first)
//   uint8_t  available[total]          (at avail_at; 1: not drawn in this cycle)
//   int64_t  journal[num_bags * k]     (at journal_at; the picks of a draw in progress)
struct BagSamplerHeader {
  uint64_t magic;
  uint32_t num_bags, k;
  uint32_t on_exhausted, reserved;
  uint64_t total;        // instances over all bags
  uint64_t seed;
  uint64_t bags_at, weights_at, avail_at, journal_at;
  std::atomic<uint64_t> recoveries;
};

// What a draw is doing to a bag, for whoever finds its drawer dead.
enum class BagJournal : uint32_t {
  kIdle = 0,
  kTaking = 1,     // removing journal[0..journal_n) from the bag: roll back
  kNewCycle = 2,   // making every instance available again: finish it
};

struct alignas(64) BagState {
  pthread_mutex_t mutex;   // process-shared, robust
  uint64_t first;          // index of the bag's first instance
  uint32_t size;
  uint32_t remaining;      // available instances with weight > 0
  uint64_t cycle;          // starts at 0; +1 each time the bag starts over
  uint64_t draws;          // draws of this bag so far (seeds each draw's generator)
  uint64_t journal_cycle;  // kNewCycle: the cycle being started
  uint32_t journal;        // BagJournal
  uint32_t journal_n;      // kTaking: picks recorded in the journal
};

}  // namespace stoker

#endif  // STOKER_SHARED_SHARED_LAYOUTS_H_
