// SpscRing: a bounded single-producer single-consumer queue of 64-bit values
// in shared memory.
//
// Process safety and invariants: RingLayout is a plain struct of atomics
// (no pointers), so it can be mapped at different addresses in different
// processes.  `head` is written only by the consumer and `tail` only by the
// producer; both count entries ever popped/pushed and never wrap in practice
// (2^64).  An entry is written before `tail` is released and read after
// `tail` is acquired, so a reader never sees a half-written slot.  A producer
// or consumer killed mid-operation leaves the ring consistent: either the
// entry was published (tail moved) or it was not.  `closed` is a one-way
// flag; consumers drain what remains and then see the ring as closed.
// Waking is left to a Doorbell owned by whoever waits (see doorbell.h).
#ifndef STOKER_SYNC_SPSC_RING_H_
#define STOKER_SYNC_SPSC_RING_H_

#include <atomic>
#include <cstdint>

namespace stoker {

struct RingLayout {
  static constexpr uint32_t kCapacity = 256;  // power of two
  alignas(64) std::atomic<uint64_t> head;     // consumer-owned
  alignas(64) std::atomic<uint64_t> tail;     // producer-owned
  std::atomic<uint32_t> closed;
  alignas(64) std::atomic<uint64_t> entries[kCapacity];
};
static_assert((RingLayout::kCapacity & (RingLayout::kCapacity - 1)) == 0);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

class SpscRing {
 public:
  explicit SpscRing(RingLayout* l) : l_(l) {}

  // Producer only.  Returns false when the ring is full.
  bool TryPush(uint64_t v) {
    const uint64_t t = l_->tail.load(std::memory_order_relaxed);
    if (t - l_->head.load(std::memory_order_acquire) >= RingLayout::kCapacity) return false;
    l_->entries[t & (RingLayout::kCapacity - 1)].store(v, std::memory_order_relaxed);
    l_->tail.store(t + 1, std::memory_order_release);
    return true;
  }
  // Consumer only.  Returns false when the ring is empty.
  bool TryPop(uint64_t* v) {
    const uint64_t h = l_->head.load(std::memory_order_relaxed);
    if (h == l_->tail.load(std::memory_order_acquire)) return false;
    *v = l_->entries[h & (RingLayout::kCapacity - 1)].load(std::memory_order_relaxed);
    l_->head.store(h + 1, std::memory_order_release);
    return true;
  }
  bool Empty() const {
    return l_->head.load(std::memory_order_acquire) == l_->tail.load(std::memory_order_acquire);
  }
  uint64_t Size() const {
    return l_->tail.load(std::memory_order_acquire) - l_->head.load(std::memory_order_acquire);
  }
  bool Full() const { return Size() >= RingLayout::kCapacity; }
  void Close() { l_->closed.store(1, std::memory_order_seq_cst); }
  bool Closed() const { return l_->closed.load(std::memory_order_acquire) != 0; }

 private:
  RingLayout* l_;
};

}  // namespace stoker

#endif  // STOKER_SYNC_SPSC_RING_H_
