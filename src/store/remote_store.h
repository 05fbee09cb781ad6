// http(s):// and s3:// stores are opened by OpenRemoteStore, which is not
// in the core library (stoker_core knows no scheme but file://) but in the
// library stoker_remote (libcurl), and reach Store::Open through its
// registry of schemes (Store::RegisterScheme):
//   a C++ program links stoker::remote and calls RegisterRemoteStores();
//   the Python module stoker._stoker registers, at import, an opener that
//     imports stoker._stoker_remote (built from stoker_remote) on first use
//     and calls its OpenRemoteStore (python/glue/remote_stores.cc).  A loader
//     that never streams from HTTP or S3 so never maps libcurl and its
//     dozens of libraries.
#ifndef STOKER_STORE_REMOTE_STORE_H_
#define STOKER_STORE_REMOTE_STORE_H_

#include <memory>
#include <string>

#include "stoker/store.h"

namespace stoker {

// True for the URLs OpenRemoteStore opens (http://, https://, s3://).
bool IsRemoteStoreUrl(const std::string& url);

// In stoker_remote: opens http(s):// and s3:// stores.
Result<std::unique_ptr<Store>> OpenRemoteStore(const std::string& url, const StoreOptions& options);

// (RegisterRemoteStores, which registers it for http, https and s3, is
// declared in the public stoker/store.h.)

}  // namespace stoker

#endif  // STOKER_STORE_REMOTE_STORE_H_
