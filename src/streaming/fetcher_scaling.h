// FetcherScaling: how many download threads (connections) a StreamingDataset
// runs when the number is left to it (StreamingOptions::fetchers = 0).
//
// It starts at the store's preference (Store::PreferredConnections) and
// tries one more connection whenever the readers waited for a shard during
// a measured interval: the downloads are the bound.  It keeps the new
// connection if the rate the connections can carry together rose by kGain
// over the interval before; otherwise it gives that one back and does not
// try again for kHoldOffIntervals.  A store that limits each connection
// (object stores do: tens of MB/s each) gets as many as help, up to
// `most`; a server whose own CPU is the bound (nginx on this machine)
// stays where it started.
//
// That rate is each connection's (bytes over the seconds its downloads
// took, all connections together) times the connections running: a
// connection more that only shares the same bound lowers each one's rate
// as much as it adds one.  (Bytes over wall time judged the connection by
// whatever else the interval held: an epoch's end, with one download left
// in flight and the rest idle, read as a connection that did not help.)
//
// Pure policy: the dataset feeds it counters and starts or retires threads.
#ifndef STOKER_STREAMING_FETCHER_SCALING_H_
#define STOKER_STREAMING_FETCHER_SCALING_H_

#include <cstdint>

namespace stoker {

class FetcherScaling {
 public:
  static constexpr double kIntervalS = 1.0;     // of download time, at least, per measurement
  static constexpr double kGain = 0.10;         // a connection more must add this much of the rate
  static constexpr uint32_t kHoldOffIntervals = 30;

  // `start` fetchers run at first; never more than `most`.
  FetcherScaling(uint32_t start, uint32_t most);

  // After each download: `busy_s`, the seconds so far with a download in
  // flight; `download_s`, the seconds so far of all downloads added up
  // (two at once for a second: 2); `bytes`, downloaded so far; `waits`, the
  // times so far a reader waited for a shard not yet there; `running`, the
  // fetchers running now.  Returns +1 (start one more fetcher), -1 (retire
  // one) or 0.
  int Observe(double busy_s, double download_s, uint64_t bytes, uint64_t waits, uint32_t running);

  uint32_t most() const { return most_; }
  uint64_t tries() const { return tries_; }  // connections tried
  uint64_t kept() const { return kept_; }    // of those, kept

 private:
  uint32_t most_;
  bool trying_ = false;  // the interval now measures the connection just added
  double base_rate_ = 0;
  uint32_t hold_off_ = 0;
  uint32_t downloads_ = 0;  // in this interval
  double busy0_ = 0, download0_ = 0;
  uint64_t bytes0_ = 0, waits0_ = 0;
  uint64_t tries_ = 0, kept_ = 0;
};

}  // namespace stoker

#endif  // STOKER_STREAMING_FETCHER_SCALING_H_
