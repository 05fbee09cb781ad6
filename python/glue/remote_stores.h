// The bridge to stoker._stoker_remote, the module holding the http(s):// and
// s3:// stores (store/remote_store.h says why they live apart).
#ifndef STOKER_PY_GLUE_REMOTE_STORES_H_
#define STOKER_PY_GLUE_REMOTE_STORES_H_

#include <string>

#include "stoker/status.h"

namespace stoker::glue {

// Registers http, https and s3 with Store::RegisterScheme: an opener that
// imports stoker._stoker_remote on first use and calls its OpenRemoteStore.
// Called once, when the _stoker module is imported.
void RegisterRemoteStoreSchemes();

// Imports stoker._stoker_remote once, if `url` is an http(s):// or s3:// URL
// (other URLs: nothing to do).  Called with the GIL held, where a URL comes
// in from Python, so that no thread that waits for another holding the GIL
// ever needs to import it; the registered opener imports it too if it was not.
Status LoadRemoteStoresFor(const std::string& url);

}  // namespace stoker::glue

#endif  // STOKER_PY_GLUE_REMOTE_STORES_H_
