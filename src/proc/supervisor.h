// Supervisor: watches worker processes through pidfds on one background
// thread and reports each exit at once (no polling).
//
// The supervisor never reaps: it reads the exit status with WNOWAIT, so the
// code that started the process (Python's multiprocessing) still joins it.
// The callback runs on the supervisor thread and must not block or call into
// Python; the Engine records the death and rings the main doorbell.
//
// Thread safety: Watch/Stop may be called from any thread.  The object must
// be destroyed in the process that created it (a forked child never runs its
// destructor: workers leave through _exit).
#ifndef STOKER_PROC_SUPERVISOR_H_
#define STOKER_PROC_SUPERVISOR_H_

#include <sys/types.h>

#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/unique_fd.h"
#include "stoker/status.h"

namespace stoker {

struct ExitInfo {
  int pid = 0;
  int exit_code = 0;   // valid when signal == 0
  int signal = 0;      // terminating signal, 0 for a normal exit
  bool core_dumped = false;
};

class Supervisor {
 public:
  using OnExit = std::function<void(uint32_t id, const ExitInfo&)>;
  explicit Supervisor(OnExit on_exit);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts watching `pid` under the caller's id.  If the process has already
  // exited, the callback fires promptly all the same.
  Status Watch(uint32_t id, pid_t pid);
  // Stops watching `id` (e.g. after a clean shutdown); no callback for it.
  void Forget(uint32_t id);
  void Stop();

 private:
  void Run();
  OnExit on_exit_;
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd that ends Run()
  std::mutex mu_;
  struct Entry { pid_t pid; UniqueFd pidfd; };
  std::unordered_map<uint32_t, Entry> watched_;
  std::thread thread_;
  pid_t owner_;
};

// Opens a pidfd (Linux >= 5.3).  Returns an invalid fd and sets errno on failure.
UniqueFd PidfdOpen(pid_t pid);

}  // namespace stoker

#endif  // STOKER_PROC_SUPERVISOR_H_
