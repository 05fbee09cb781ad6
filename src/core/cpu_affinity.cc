#include "core/cpu_affinity.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stoker {

Result<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return Status::IOError(std::string("sched_getaffinity: ") + std::strerror(errno), errno);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

Result<cpu_set_t> CpuSetOf(const std::vector<int>& cpus, const std::string& option) {
  if (cpus.empty()) return Status::InvalidArgument(option + " is empty: name at least one CPU, or leave it unset");
  STOKER_ASSIGN_OR_RETURN(std::vector<int> allowed, AllowedCpus());
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !std::binary_search(allowed.begin(), allowed.end(), c))
      return Status::InvalidArgument(option + ": CPU " + std::to_string(c) +
                                     " is not one this process may run on (its CPUs: " + FormatCpuList(allowed) +
                                     "; see `taskset -p` or the cgroup's cpuset)");
    CPU_SET(c, &set);
  }
  return set;
}

std::vector<int> CpusBesideServer(const std::vector<int>& allowed) {
  if (allowed.size() < 2) return {};
  const size_t n = std::max<size_t>(1, allowed.size() / 4);
  return std::vector<int>(allowed.end() - static_cast<std::ptrdiff_t>(n), allowed.end());
}

Status ConfineThread(std::thread& t, const cpu_set_t& set, const std::string& option) {
  const int rc = pthread_setaffinity_np(t.native_handle(), sizeof set, &set);
  if (rc != 0)
    return Status::IOError(option + ": could not confine a thread to its CPUs: " + std::strerror(rc), rc);
  return Status::OK();
}

}  // namespace stoker
