// What a process's memory costs, from /proc/<pid>/smaps_rollup.
//
//   rss  resident pages, shared ones counted in full
//   pss  each shared page divided by the number of processes mapping it:
//        summed over a process tree it is the tree's true footprint
//   uss  pages only this process maps (private clean + dirty): what killing
//        it would free
#ifndef STOKER_PROC_PROC_MEMORY_H_
#define STOKER_PROC_PROC_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

#include "stoker/status.h"

namespace stoker {

struct ProcessMemory {
  uint64_t rss = 0, pss = 0, uss = 0;  // bytes
  uint64_t pss_shmem = 0;              // the part of pss in shared memory (shmem/memfd pages)
};

// IOError (ENOENT) when the process is gone.
Result<ProcessMemory> ReadProcessMemory(pid_t pid);

// The private pages (bytes) of `pid` outside the mappings whose name holds
// `exclude` (e.g. "stoker-arena": the slot pool's memfd, counted as the
// pool's): the memory the process holds of its own, not the pages it still
// shares with the process it was forked from.  Reads /proc/<pid>/smaps (a
// line per field of every mapping: a millisecond or more for a process
// mapping many libraries).
Result<uint64_t> ReadPrivateBytesOutside(pid_t pid, const std::string& exclude);

// Resident bytes only, from /proc/<pid>/statm: cheap enough to sample often
// (the trace's counters).
Result<uint64_t> ReadResidentBytes(pid_t pid);

// How much memory this process may use at most: the smaller of MemTotal and
// every memory limit of its cgroup and the cgroup's ancestors (v1 or v2).
Result<uint64_t> MemoryLimitBytes();

// The system's Shmem line of /proc/meminfo (bytes): tmpfs, /dev/shm and memfds.
Result<uint64_t> SystemShmemBytes();

}  // namespace stoker

#endif  // STOKER_PROC_PROC_MEMORY_H_
