// streaming/fetcher_scaling: how many connections a StreamingDataset runs when
// the number is left to it.
#include "streaming/fetcher_scaling.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace stoker {
namespace {

// Feeds a FetcherScaling downloads of `shard` bytes, as the dataset does:
// `per_connection` bytes/s on each of `running` connections up to a server
// limit of `server` bytes/s in all (shared evenly); the readers wait (or
// not).  Returns the step it asked for, applied.
struct Sim {
  FetcherScaling f;
  uint32_t running;
  double busy = 0, download = 0;
  uint64_t bytes = 0, waits = 0;
  explicit Sim(uint32_t start, uint32_t most) : f(start, most), running(start) {}
  int Download(double per_connection, double server, bool readers_wait, uint64_t shard = 8 << 20) {
    const double total = std::min(per_connection * running, server);
    busy += static_cast<double>(shard) / total;                     // downloads overlap
    download += static_cast<double>(shard) / (total / running);  // this one's own time
    bytes += shard;
    waits += readers_wait;
    const int step = f.Observe(busy, download, bytes, waits, running);
    running += step;
    return step;
  }
};

TEST(FetcherScaling, GrowsWhileEachConnectionMoreAddsToTheRate) {
  // 50 MB/s per connection (an object store), no server limit: it grows to `most`.
  Sim s(2, 8);
  for (int i = 0; i < 2000 && s.running < 8; ++i) s.Download(50e6, 1e12, true);
  EXPECT_EQ(s.running, 8u);
  EXPECT_EQ(s.f.tries(), 6u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(s.Download(50e6, 1e12, true), 0);  // never past `most`
  EXPECT_EQ(s.running, 8u);
  EXPECT_EQ(s.f.kept(), 6u);  // (the eighth judged after the loop above)
}

TEST(FetcherScaling, GivesBackAConnectionThatAddsNothing) {
  // The server's 2.6 GB/s is reached with 2: a third is tried, gains
  // nothing, is given back, and none is tried again for the hold-off.
  Sim s(2, 8);
  int grew = 0, shrank = 0, i = 0;
  for (; i < 2000 && shrank == 0; ++i) {
    const int step = s.Download(1.5e9, 2.6e9, true);
    grew += step > 0;
    shrank += step < 0;
  }
  EXPECT_EQ(grew, 1);
  EXPECT_EQ(shrank, 1);
  EXPECT_EQ(s.running, 2u);
  EXPECT_EQ(s.f.kept(), 0u);
  // 30 intervals of holding off: about 30 s of downloads at 2.6 GB/s.
  const double held_from = s.busy;
  for (int k = 0; k < 20000; ++k) {
    if (s.Download(1.5e9, 2.6e9, true) > 0) break;
  }
  EXPECT_GE(s.busy - held_from, FetcherScaling::kHoldOffIntervals * FetcherScaling::kIntervalS);
  EXPECT_EQ(s.running, 3u);  // then it looks again
}

TEST(FetcherScaling, NeverGrowsWhileTheReadersDoNotWait) {
  Sim s(2, 8);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(s.Download(50e6, 1e12, false), 0);
  EXPECT_EQ(s.running, 2u);
  EXPECT_EQ(s.f.tries(), 0u);
}

TEST(FetcherScaling, AnIntervalIsASecondOfDownloadsAndOnePerFetcher) {
  FetcherScaling f(4, 8);
  // Three downloads over 5 s: fewer than one per fetcher, no decision yet.
  EXPECT_EQ(f.Observe(2.0, 4.0, 100, 1, 4), 0);
  EXPECT_EQ(f.Observe(4.0, 8.0, 200, 2, 4), 0);
  EXPECT_EQ(f.Observe(5.0, 12.0, 300, 3, 4), 0);
  EXPECT_EQ(f.Observe(5.5, 14.0, 400, 4, 4), 1);  // the fourth: readers waited, so one more
  // Half a second more of downloads (5 fetchers now) is not an interval, however many.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(f.Observe(5.5 + 0.05 * (i + 1), 14.0 + 0.2 * (i + 1), 500 + 100 * i, 5, 5), 0);
}

TEST(FetcherScaling, AnEpochsEndDoesNotReadAsAConnectionThatDidNotHelp) {
  // Each connection carries 10 MB/s.  The interval that judges the third
  // one holds an epoch's end: a second with one download in flight and
  // the others idle.  Bytes over wall time would fall; each connection's
  // rate times the connections does not.
  FetcherScaling f(2, 8);
  const uint64_t mb = 1000000;
  // 2 at once for 1 s: 20 MB; the readers waited.
  uint32_t running = 2;
  EXPECT_EQ(f.Observe(0.5, 1.0, 10 * mb, 0, running), 0);
  running += f.Observe(1.0, 2.0, 20 * mb, 1, running);  // 20 MB/s, the readers waited: try a third
  EXPECT_EQ(running, 3u);
  EXPECT_EQ(f.Observe(1.6, 3.8, 38 * mb, 1, running), 0);  // 3 at once for 0.6 s: 18 MB
  EXPECT_EQ(f.Observe(2.6, 4.8, 48 * mb, 1, running), 0);  // the epoch's last shard alone for 1 s: 10 MB
  // 3 at once again for 0.1 s.  Over the interval: 31 MB in 1.7 s, 18 MB/s
  // by the wall (less than 20: given back), but 10 MB/s on each of 3
  // connections, 30 MB/s: kept.
  running += f.Observe(2.7, 5.1, 51 * mb, 1, running);
  EXPECT_EQ(f.kept(), 1u);
  EXPECT_EQ(running, 3u);
}

TEST(FetcherScaling, MostIsAtLeastTheStart) {
  FetcherScaling f(6, 2);
  EXPECT_EQ(f.most(), 6u);
}

}  // namespace
}  // namespace stoker
