// CPU sets for stoker's own threads (StreamingOptions::fetcher_cpus).
//
// Confining a group of threads to some CPUs keeps them off the others: off
// the cores a training step's threads use, or, where the store's server runs
// on the same machine (a local gateway, nginx on loopback), off the core the
// server needs.  On two cores shared with nginx on loopback, fetchers
// confined to one CPU streamed faster than spread over both
// (docs/benchmarks.md, "Streaming cache"): spread, a fetcher woken on the
// server's core preempts it.
#ifndef STOKER_CORE_CPU_AFFINITY_H_
#define STOKER_CORE_CPU_AFFINITY_H_

#include <sched.h>

#include <string>
#include <thread>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// The CPUs this process may run on (its affinity mask), or an error.
Result<std::vector<int>> AllowedCpus();

// "0-3,8,10-11": a sorted CPU list as Linux writes one (Cpus_allowed_list).
std::string FormatCpuList(std::vector<int> cpus);

// The set of `cpus` after checking that each is one this process may run on;
// `option` names the setting in the error ("fetcher_cpus").  Empty `cpus` is
// an error too: the caller leaves threads alone instead.
Result<cpu_set_t> CpuSetOf(const std::vector<int>& cpus, const std::string& option);

// Where fetchers go when the store's server runs on this machine and the
// caller named no CPUs: the last quarter of `allowed` (at least one CPU), so
// that the server's threads keep the rest.  Empty (leave them anywhere)
// where fewer than two CPUs are allowed.  Why: the server's sends wake the
// fetchers, and the kernel tends to place a thread woken by a socket's data
// on its waker's CPU: there they preempt the server while another CPU
// sits idle; on two cores shared with nginx, one CPU was idle 21-44% of an
// epoch while nginx waited for a CPU 8-15% of it (docs/benchmarks.md).
// Confined, the fetchers keep to their CPUs and the scheduler keeps the
// server off them.
std::vector<int> CpusBesideServer(const std::vector<int>& allowed);

// Confines thread `t` to `set`.
Status ConfineThread(std::thread& t, const cpu_set_t& set, const std::string& option);

}  // namespace stoker

#endif  // STOKER_CORE_CPU_AFFINITY_H_
