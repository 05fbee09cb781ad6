// Process-shared robust pthread mutexes in shared memory: the one place
// that initialises, locks (with a timeout, recovering from a dead holder)
// and unlocks them.
#ifndef STOKER_SHARED_ROBUST_MUTEX_H_
#define STOKER_SHARED_ROBUST_MUTEX_H_

#include <pthread.h>

#include <cstdint>

#include "stoker/status.h"

namespace stoker {

// Initialises *m in shared memory (recursive: the holding thread may lock again).
Status InitRobustMutex(pthread_mutex_t* m, bool recursive);
// Waits up to timeout_ns (< 0: forever; 0: try once).  When the previous
// holder died holding it, takes it, marks it consistent and sets
// *owner_died.  Timeout when not taken in time.
Status LockRobustMutex(pthread_mutex_t* m, int64_t timeout_ns, bool* owner_died);
Status UnlockRobustMutex(pthread_mutex_t* m);

}  // namespace stoker

#endif  // STOKER_SHARED_ROBUST_MUTEX_H_
