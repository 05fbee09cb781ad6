#include "cache/remote_store.h"

#include "cache/http_store.h"
#include "cache/s3_store.h"

// What `-u stoker_link_remote_stores` (stoker_remote's link option) asks
// for, so that the linker takes this object and its OpenRemoteStore.
extern "C" void stoker_link_remote_stores() {}

namespace stoker {

Result<std::unique_ptr<Store>> OpenRemoteStore(const std::string& url, const StoreOptions& options) {
  if (url.rfind("s3://", 0) == 0) {
    STOKER_ASSIGN_OR_RETURN(auto s, S3Store::Create(url, options));
    return std::unique_ptr<Store>(std::move(s));
  }
  STOKER_ASSIGN_OR_RETURN(auto s, HttpStore::Create(url, options));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace stoker
