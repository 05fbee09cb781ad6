// stoker/eviction_order.h -- which shards a cache directory gives up first
// when it needs room (StreamingOptions::eviction; the shard cache's own
// option, so that it needs nothing of the streaming dataset above it).
#ifndef STOKER_EVICTION_ORDER_H_
#define STOKER_EVICTION_ORDER_H_

#include <cstdint>

namespace stoker {

enum class EvictionOrder : uint8_t { kLeastRecentlyUsed = 0, kOldest = 1 };

}  // namespace stoker

#endif  // STOKER_EVICTION_ORDER_H_
