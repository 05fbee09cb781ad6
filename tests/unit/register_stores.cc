// The unit tests open http(s):// and s3:// stores through Store::Open, as a
// C++ program linking stoker::remote does: after RegisterRemoteStores().
#include "store/remote_store.h"

namespace {
const bool kRegistered = [] {
  stoker::RegisterRemoteStores();
  return true;
}();
}  // namespace
