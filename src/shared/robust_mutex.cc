#include "shared/robust_mutex.h"

#include <errno.h>
#include <time.h>

#include <string>

namespace stoker {

Status InitRobustMutex(pthread_mutex_t* m, bool recursive) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (!rc) rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (!rc && recursive) rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  if (!rc) rc = pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
  if (rc) return Status::IOError("initialising a process-shared robust mutex", rc);
  return Status::OK();
}

Status LockRobustMutex(pthread_mutex_t* m, int64_t timeout_ns, bool* owner_died) {
  if (owner_died) *owner_died = false;
  int rc;
  if (timeout_ns == 0) {
    rc = pthread_mutex_trylock(m);
    if (rc == EBUSY) return Status::Timeout("the lock is held");
  } else if (timeout_ns < 0) {
    rc = pthread_mutex_lock(m);
  } else {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t ns = ts.tv_nsec + timeout_ns % 1'000'000'000;
    ts.tv_sec += timeout_ns / 1'000'000'000 + ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
    rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts);
    if (rc == ETIMEDOUT) return Status::Timeout("the lock was not free within the timeout");
  }
  if (rc == EOWNERDEAD) {
    // The holder died holding it: it is ours now, and usable again once
    // marked consistent.  The caller repairs what it guards.
    if (owner_died) *owner_died = true;
    rc = pthread_mutex_consistent(m);
  }
  if (rc == EDEADLK) return Status::InvalidArgument("this thread already holds the (non-reentrant) lock");
  if (rc) return Status::IOError("locking a process-shared mutex", rc);
  return Status::OK();
}

Status UnlockRobustMutex(pthread_mutex_t* m) {
  const int rc = pthread_mutex_unlock(m);
  if (rc == EPERM) return Status::InvalidArgument("release of a lock this thread does not hold");
  if (rc) return Status::IOError("unlocking a process-shared mutex", rc);
  return Status::OK();
}

}  // namespace stoker
