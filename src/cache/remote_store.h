// http(s):// and s3:// stores are opened by OpenRemoteStore, which is not
// in the core library (stoker_core, which refers to it weakly) but in one of
// two places chosen when a program is linked:
//   src/cache/remote_store.cc, in the library stoker_remote (libcurl): opens
//     them itself.  C++ programs get it with stoker::remote (or stoker::stoker).
//   python/glue/remote_stores.cc, in the Python module stoker._stoker: asks
//     the module stoker._stoker_remote (built from stoker_remote) for its
//     OpenRemoteStore, importing it on first use.  A loader that never streams
//     from HTTP or S3 so never maps libcurl and its dozens of libraries.
#ifndef STOKER_CACHE_REMOTE_STORE_H_
#define STOKER_CACHE_REMOTE_STORE_H_

#include <memory>
#include <string>

#include "stoker/store.h"

namespace stoker {

// True for the URLs OpenRemoteStore opens (http://, https://, s3://).
bool IsRemoteStoreUrl(const std::string& url);

Result<std::unique_ptr<Store>> OpenRemoteStore(const std::string& url, const StoreOptions& options);

// Its type, as stoker._stoker_remote hands it to stoker._stoker.
using RemoteStoreOpener = Result<std::unique_ptr<Store>> (*)(const std::string& url, const StoreOptions& options);

}  // namespace stoker

#endif  // STOKER_CACHE_REMOTE_STORE_H_
