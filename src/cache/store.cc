#include <sys/stat.h>

#include <cerrno>

#include "cache/file_store.h"
#include "cache/remote_store.h"
#include "stoker/store.h"

namespace stoker {

// Weak: defined by stoker_remote or by the _stoker Python module
// (cache/remote_store.h); null in a program that links neither.
[[gnu::weak]] Result<std::unique_ptr<Store>> OpenRemoteStore(const std::string& url, const StoreOptions& options);

bool IsRemoteStoreUrl(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0 || url.rfind("s3://", 0) == 0;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& url, const StoreOptions& options) {
  if (options.attempts < 1)
    return Status::InvalidArgument("the store's attempts option must be at least 1, got " +
                                   std::to_string(options.attempts));
  if (IsRemoteStoreUrl(url)) {
    if (!OpenRemoteStore)
      return Status::InvalidArgument("store URL '" + url + "': this program has no http(s):// or s3:// stores; link "
                                     "stoker::remote (CMake: find_package(stoker COMPONENTS remote)) or "
                                     "libstoker_remote.a, which has them");
    return OpenRemoteStore(url, options);
  }
  std::string dir = url;
  if (url.rfind("file://", 0) == 0) dir = url.substr(7);
  else if (url.find("://") != std::string::npos)
    return Status::InvalidArgument("store URL '" + url + "': only file://, http://, https:// and s3:// (or a path) are known");
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
