#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "store/file_store.h"
#include "store/remote_store.h"
#include "stoker/store.h"

namespace stoker {

namespace {

// The schemes registered (Store::RegisterScheme): the remote component's,
// the Python module's loader of it, a program's own.
struct Schemes {
  std::mutex mu;
  std::map<std::string, StoreOpener> openers;
};

Schemes& Registry() {
  static Schemes* s = new Schemes;  // (never destroyed: stores may be opened by threads at exit)
  return *s;
}

}  // namespace

bool IsRemoteStoreUrl(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0 || url.rfind("s3://", 0) == 0;
}

void Store::RegisterScheme(const std::string& scheme, StoreOpener opener) {
  Schemes& r = Registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.openers[scheme] = opener;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& url, const StoreOptions& options) {
  if (options.attempts < 1)
    return Status::InvalidArgument("the store's attempts option must be at least 1, got " +
                                   std::to_string(options.attempts));
  const size_t sep = url.find("://");
  const std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  if (!scheme.empty() && scheme != "file") {
    StoreOpener opener = nullptr;
    std::string known = "file://";  // (for the error: only where there is no opener)
    {
      Schemes& r = Registry();
      std::lock_guard<std::mutex> g(r.mu);
      auto it = r.openers.find(scheme);
      if (it != r.openers.end()) opener = it->second;
      else
        for (const auto& [s, _] : r.openers) known += ", " + s + "://";
    }
    if (opener) return opener(url, options);
    if (IsRemoteStoreUrl(url))
      return Status::InvalidArgument("store URL '" + url + "': this program has no http(s):// or s3:// stores; link "
                                     "stoker::remote (CMake: find_package(stoker COMPONENTS remote)) and call "
                                     "stoker::RegisterRemoteStores() once");
    return Status::InvalidArgument("store URL '" + url + "': no store for " + scheme + ":// (known: " + known +
                                   " and paths; Store::RegisterScheme adds one)");
  }
  std::string dir = url;
  if (scheme == "file") dir = url.substr(7);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return Status::IOError("store " + url + ": stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("store " + url + ": " + dir + " is not a directory");
  return std::unique_ptr<Store>(new FileStore(url, dir));
}

Result<std::vector<StoreObject>> Store::List() {
  return Status::InvalidArgument("store " + url_ + " cannot list its objects: put an index file there "
                                 "(`stoker index DIR` writes one) or pass the shards");
}

}  // namespace stoker
