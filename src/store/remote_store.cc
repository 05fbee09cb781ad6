#include "store/remote_store.h"

#include "store/http_store.h"
#include "store/s3_store.h"

namespace stoker {

Result<std::unique_ptr<Store>> OpenRemoteStore(const std::string& url, const StoreOptions& options) {
  if (url.rfind("s3://", 0) == 0) {
    STOKER_ASSIGN_OR_RETURN(auto s, S3Store::Create(url, options));
    return std::unique_ptr<Store>(std::move(s));
  }
  STOKER_ASSIGN_OR_RETURN(auto s, HttpStore::Create(url, options));
  return std::unique_ptr<Store>(std::move(s));
}

void RegisterRemoteStores() {
  for (const char* scheme : {"http", "https", "s3"}) Store::RegisterScheme(scheme, &OpenRemoteStore);
}

}  // namespace stoker
