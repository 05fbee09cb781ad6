// AtomicSharedPtr<T>: what std::atomic<std::shared_ptr<T>> (C++20) offers,
// load() and store(), for the standard libraries that do not have it yet
// (LLVM's libc++, which zig's toolchain for older glibc targets ships:
// docs/packaging.md).  libstdc++'s own takes a lock too; this one is a
// mutex held for a copy of the pointer, and the old value is released after.
#ifndef STOKER_CORE_ATOMIC_SHARED_PTR_H_
#define STOKER_CORE_ATOMIC_SHARED_PTR_H_

#include <memory>
#include <mutex>

namespace stoker {

template <typename T>
class AtomicSharedPtr {
 public:
  std::shared_ptr<T> load() const {
    std::lock_guard<std::mutex> g(mu_);
    return p_;
  }
  void store(std::shared_ptr<T> p) {
    {
      std::lock_guard<std::mutex> g(mu_);
      p_.swap(p);
    }
    // (the old value, now in p, is released here, outside the lock)
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<T> p_;
};

}  // namespace stoker

#endif  // STOKER_CORE_ATOMIC_SHARED_PTR_H_
