// core/atomic_shared_ptr: loads see whole values while others store, and a
// replaced value is released once no load holds it.
#include "core/atomic_shared_ptr.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoker {
namespace {

struct Pair {
  explicit Pair(int v) : a(v), b(-v) {}
  int a, b;
};

TEST(AtomicSharedPtr, LoadsSeeWholeValuesWhileOthersStore) {
  AtomicSharedPtr<Pair> cell;
  EXPECT_EQ(cell.load(), nullptr);
  cell.store(std::make_shared<Pair>(0));
  std::atomic<bool> stop{false};
  std::atomic<long> torn{0}, loads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&] {
      while (!stop.load()) {
        std::shared_ptr<Pair> p = cell.load();
        if (!p || p->a != -p->b) ++torn;
        ++loads;
      }
    });
  for (int i = 1; i <= 20000; ++i) cell.store(std::make_shared<Pair>(i));
  while (loads.load() < 1000) std::this_thread::yield();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(cell.load()->a, 20000);
}

TEST(AtomicSharedPtr, AReplacedValueIsReleasedWhenTheLastLoadDropsIt) {
  AtomicSharedPtr<Pair> cell;
  auto first = std::make_shared<Pair>(1);
  std::weak_ptr<Pair> watch = first;
  cell.store(std::move(first));
  std::shared_ptr<Pair> held = cell.load();
  cell.store(std::make_shared<Pair>(2));
  EXPECT_FALSE(watch.expired());  // a load still holds it
  held.reset();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace stoker
