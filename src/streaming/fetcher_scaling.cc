// FetcherScaling (fetcher_scaling.h).
#include "streaming/fetcher_scaling.h"

#include <algorithm>

namespace stoker {

FetcherScaling::FetcherScaling(uint32_t start, uint32_t most) : most_(std::max(start, most)) {}

int FetcherScaling::Observe(double busy_s, double download_s, uint64_t bytes, uint64_t waits, uint32_t running) {
  ++downloads_;
  // An interval: kIntervalS of download time, and a download per fetcher
  // at least (a rate from one large shard's end says little).
  if (busy_s - busy0_ < kIntervalS || downloads_ < running || download_s <= download0_) return 0;
  const double rate = static_cast<double>(bytes - bytes0_) / (download_s - download0_) * running;
  const bool waited = waits > waits0_;
  busy0_ = busy_s;
  download0_ = download_s;
  bytes0_ = bytes;
  waits0_ = waits;
  downloads_ = 0;
  if (trying_) {
    trying_ = false;
    if (rate >= base_rate_ * (1 + kGain)) {
      ++kept_;
      return 0;  // kept; the next interval may try another
    }
    hold_off_ = kHoldOffIntervals;
    return -1;
  }
  if (hold_off_ > 0) {
    --hold_off_;
    return 0;
  }
  if (!waited || running >= most_) return 0;
  trying_ = true;
  base_rate_ = rate;
  ++tries_;
  return +1;
}

}  // namespace stoker
