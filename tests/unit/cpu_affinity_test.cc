// core/cpu_affinity.h: CPU sets for stoker's threads (fetcher_cpus).
#include "core/cpu_affinity.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <thread>

namespace stoker {
namespace {

TEST(CpuAffinity, FormatsListsAsLinuxDoes) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({11, 3, 0, 1, 2, 8, 10, 2}), "0-3,8,10-11");
}

TEST(CpuAffinity, AllowedCpusIsThisProcesssMask) {
  auto allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  ASSERT_FALSE(allowed.value().empty());
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(static_cast<int>(allowed.value().size()), CPU_COUNT(&set));
  for (int c : allowed.value()) EXPECT_TRUE(CPU_ISSET(c, &set)) << c;
}

TEST(CpuAffinity, RefusesCpusTheProcessCannotUseNamingThem) {
  const std::vector<int> allowed = AllowedCpus().value();
  auto empty = CpuSetOf({}, "fetcher_cpus");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("fetcher_cpus is empty"), std::string::npos);
  for (int bad : {-1, CPU_SETSIZE, allowed.back() + 1}) {
    auto r = CpuSetOf({allowed.front(), bad}, "fetcher_cpus");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    const std::string want = "fetcher_cpus: CPU " + std::to_string(bad) +
                             " is not one this process may run on (its CPUs: " + FormatCpuList(allowed) + ";";
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(CpuAffinity, FetchersBesideAServerTakeTheLastQuarter) {
  EXPECT_TRUE(CpusBesideServer({}).empty());
  EXPECT_TRUE(CpusBesideServer({3}).empty());  // one CPU: nothing to keep apart
  EXPECT_EQ(CpusBesideServer({0, 1}), (std::vector<int>{1}));
  EXPECT_EQ(CpusBesideServer({0, 1, 2, 3, 4, 5, 6}), (std::vector<int>{6}));
  EXPECT_EQ(CpusBesideServer({0, 1, 2, 3, 4, 5, 6, 7}), (std::vector<int>{6, 7}));
  EXPECT_EQ(CpusBesideServer({2, 5, 9, 12}), (std::vector<int>{12}));  // a cpuset with gaps
}

TEST(CpuAffinity, ConfinesAThreadToTheSet) {
  const int cpu = AllowedCpus().value().back();
  auto set = CpuSetOf({cpu}, "fetcher_cpus");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(CPU_COUNT(&set.value()), 1);
  std::atomic<bool> go{false};
  cpu_set_t seen;
  CPU_ZERO(&seen);
  int ran_on = -1;
  std::thread t([&] {
    while (!go.load()) std::this_thread::yield();
    sched_getaffinity(0, sizeof seen, &seen);
    ran_on = sched_getcpu();
  });
  ASSERT_TRUE(ConfineThread(t, set.value(), "fetcher_cpus").ok());
  go = true;
  t.join();
  EXPECT_EQ(CPU_COUNT(&seen), 1);
  EXPECT_TRUE(CPU_ISSET(cpu, &seen));
  EXPECT_EQ(ran_on, cpu);
}

}  // namespace
}  // namespace stoker
