#include "proc/proc_memory.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>

namespace stoker {

namespace {

// Calls on_line(key, kB) for each "Key:   123 kB" line of `path`.
template <typename F>
Status ForEachKbLine(const std::string& path, F on_line) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return Status::IOError("open " + path, errno);
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    char key[64];
    unsigned long long kb = 0;
    if (std::sscanf(line, "%63[^:]: %llu kB", key, &kb) == 2) on_line(key, uint64_t{kb} * 1024);
  }
  std::fclose(f);
  return Status::OK();
}

}  // namespace

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  ProcessMemory m;
  STOKER_RETURN_IF_ERROR(ForEachKbLine("/proc/" + std::to_string(pid) + "/smaps_rollup",
                                       [&](const char* k, uint64_t v) {
                                         if (!std::strcmp(k, "Rss")) m.rss = v;
                                         else if (!std::strcmp(k, "Pss")) m.pss = v;
                                         else if (!std::strcmp(k, "Private_Clean") ||
                                                  !std::strcmp(k, "Private_Dirty"))
                                           m.uss += v;
                                         else if (!std::strcmp(k, "Pss_Shmem")) m.pss_shmem = v;
                                       }));
  return m;
}

Result<uint64_t> ReadPrivateBytesOutside(pid_t pid, const std::string& exclude) {
  const std::string path = "/proc/" + std::to_string(pid) + "/smaps";
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return Status::IOError("open " + path, errno);
  uint64_t total = 0;
  bool skip = false;
  char line[1024];
  while (std::fgets(line, sizeof line, f)) {
    if (line[0] < 'A' || line[0] > 'Z') {  // a mapping's first line: "start-end perms offset dev inode [name]"
      skip = !exclude.empty() && std::strstr(line, exclude.c_str()) != nullptr;
      continue;
    }
    char key[64];
    unsigned long long kb = 0;
    if (!skip && std::sscanf(line, "%63[^:]: %llu kB", key, &kb) == 2 &&
        (!std::strcmp(key, "Private_Clean") || !std::strcmp(key, "Private_Dirty")))
      total += kb * 1024;
  }
  std::fclose(f);
  return total;
}

namespace {

// A cgroup limit file: a number, or "max" (no limit).
uint64_t ReadLimit(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return UINT64_MAX;
  unsigned long long v = UINT64_MAX;
  if (std::fscanf(f, "%llu", &v) != 1) v = UINT64_MAX;
  std::fclose(f);
  return v;
}

// Smallest `file` limit along the cgroup `path` (under `root`) and its ancestors.
uint64_t CgroupLimit(const std::string& root, std::string path, const char* file) {
  uint64_t limit = UINT64_MAX;
  for (;;) {
    limit = std::min(limit, ReadLimit(root + path + (path == "/" ? "" : "/") + file));
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return limit;
}

}  // namespace

Result<uint64_t> ReadResidentBytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/statm";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return Status::IOError("open " + path, errno);
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return Status::IOError("cannot parse " + path, EINVAL);
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

Result<uint64_t> MemoryLimitBytes() {
  uint64_t total = 0;
  STOKER_RETURN_IF_ERROR(ForEachKbLine("/proc/meminfo", [&](const char* k, uint64_t v) {
    if (!std::strcmp(k, "MemTotal")) total = v;
  }));
  uint64_t limit = total ? total : UINT64_MAX;
  if (FILE* f = std::fopen("/proc/self/cgroup", "re")) {
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      if (!l.empty() && l.back() == '\n') l.pop_back();
      const size_t a = l.find(':'), b = l.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string controllers = l.substr(a + 1, b - a - 1), path = l.substr(b + 1);
      if (controllers.empty())  // v2
        limit = std::min(limit, CgroupLimit("/sys/fs/cgroup", path, "memory.max"));
      else if (("," + controllers + ",").find(",memory,") != std::string::npos)  // v1
        limit = std::min(limit, CgroupLimit("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"));
    }
    std::fclose(f);
  }
  return limit;
}

Result<uint64_t> SystemShmemBytes() {
  uint64_t shmem = 0;
  bool found = false;
  STOKER_RETURN_IF_ERROR(ForEachKbLine("/proc/meminfo", [&](const char* k, uint64_t v) {
    if (!std::strcmp(k, "Shmem")) {
      shmem = v;
      found = true;
    }
  }));
  if (!found) return Status::IOError("no Shmem line in /proc/meminfo", ENOENT);
  return shmem;
}

}  // namespace stoker
