#include "stoker/shared_counter.h"

#include "shared/shared_block.h"
#include "shared/shared_layouts.h"

namespace stoker {

namespace {
std::atomic<int64_t>& Value(const SharedBlock& b) { return reinterpret_cast<CounterLayout*>(b.data())->value; }
}  // namespace

Result<std::shared_ptr<SharedCounter>> SharedCounter::Create(int64_t initial) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<SharedBlock> b,
                          SharedBlock::Create(sizeof(CounterLayout), "stoker-counter"));
  CounterLayout* c = new (b->data()) CounterLayout();
  c->magic = kCounterMagic;
  c->value.store(initial, std::memory_order_release);
  return std::shared_ptr<SharedCounter>(new SharedCounter(std::move(b)));
}

Result<std::shared_ptr<SharedCounter>> SharedCounter::Open(std::shared_ptr<SharedBlock> block) {
  if (block->size() < sizeof(CounterLayout) || reinterpret_cast<CounterLayout*>(block->data())->magic != kCounterMagic ||
      block->sealed())
    return Status::InvalidArgument("shared block is not a stoker counter");
  return std::shared_ptr<SharedCounter>(new SharedCounter(std::move(block)));
}

int64_t SharedCounter::Load() const { return Value(*block_).load(std::memory_order_acquire); }
void SharedCounter::Store(int64_t v) { Value(*block_).store(v, std::memory_order_release); }
int64_t SharedCounter::Add(int64_t delta) { return Value(*block_).fetch_add(delta, std::memory_order_acq_rel) + delta; }
int64_t SharedCounter::Exchange(int64_t v) { return Value(*block_).exchange(v, std::memory_order_acq_rel); }
bool SharedCounter::CompareExchange(int64_t* expected, int64_t desired) {
  return Value(*block_).compare_exchange_strong(*expected, desired, std::memory_order_acq_rel);
}

}  // namespace stoker
