// A watchdog for tests that could hang: aborts the process (with a message)
// if the guarded scope outlives its deadline.
#ifndef STOKER_TESTS_WATCHDOG_H_
#define STOKER_TESTS_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace stoker::testing {

class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit, const char* what = "test")
      : thread_([this, limit, what] {
          std::unique_lock<std::mutex> l(mu_);
          if (!cv_.wait_for(l, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s still running after %llds, aborting\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_WATCHDOG_H_
