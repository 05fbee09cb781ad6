// stoker::Store: where shards come from, selected by URL (the streaming
// cache builds on it):
//   /data/shards or file:///data/shards    a local or mounted directory
//   http://host:port/path, https://...     HTTP(S) with libcurl: range
//                                          requests, one kept-alive
//                                          connection per Store, retries
//                                          with exponential backoff, timeouts
//   s3://bucket/prefix                     S3 or an S3-compatible store:
//                                          the same over HTTP(S), each
//                                          request signed (AWS SigV4, by
//                                          libcurl), credentials found as
//                                          the AWS SDKs find them (S3Options)
// http(s):// and s3:// are the remote component's (stoker::remote, libcurl):
// a C++ program that links it calls stoker::RegisterRemoteStores() once
// (store/remote_store.h; the Python package does it for you), and any other
// scheme can be given a store of the program's own with Store::RegisterScheme.
// A Store is used by one thread at a time (give each fetcher its own).
#ifndef STOKER_STORE_H_
#define STOKER_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// s3:// stores.  Each empty field is found as the AWS SDKs find it:
//   credentials  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN;
//                else the profile's in the shared credentials file
//                (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials),
//                else the profile's in the config file; none at all: requests
//                go unsigned (public buckets)
//   profile      AWS_PROFILE, else "default"
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region` in
//                the config file (AWS_CONFIG_FILE, default ~/.aws/config),
//                else us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//                `endpoint_url`; none: AWS itself
// An endpoint (an S3-compatible server: MinIO, SeaweedFS, Ceph, R2...) is
// addressed path-style (endpoint/bucket/key); AWS virtual-hosted
// (https://bucket.s3.region.amazonaws.com/key).
struct S3Options {
  std::string region;
  std::string endpoint;        // e.g. http://127.0.0.1:8333
  std::string profile;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
};

// An object directly under a store's root (Store::List).
struct StoreObject {
  std::string name;
  uint64_t size = 0;
};

struct StoreOptions {
  int attempts = 5;               // tries per request before the error
  double backoff_s = 0.1;         // wait after the first failure, doubled after each (at most max_backoff_s)
  double max_backoff_s = 5.0;
  double connect_timeout_s = 10;  // HTTP: to connect
  double stall_timeout_s = 30;    // HTTP: a transfer slower than 1 KiB/s for this long fails (and is retried)
  // http:// (not https, not through a proxy): Read receives the bytes straight
  // into the caller's memory rather than through libcurl's buffer (one copy
  // less); false: always libcurl's path.
  bool receive_in_place = true;
  S3Options s3;                   // s3:// only
};

class Store;
// Opens a store for a URL of a registered scheme (Store::RegisterScheme).
using StoreOpener = Result<std::unique_ptr<Store>> (*)(const std::string& url, const StoreOptions& options);

class Store {
 public:
  // The store `url` names: a directory (a path or file://), or a URL of a
  // registered scheme.
  static Result<std::unique_ptr<Store>> Open(const std::string& url, const StoreOptions& options = {});
  // From now on Store::Open opens URLs "scheme://..." with `opener` (the
  // last registration of a scheme wins).  Thread-safe.
  static void RegisterScheme(const std::string& scheme, StoreOpener opener);
  virtual ~Store() = default;
  const std::string& url() const { return url_; }
  // The URL (or path) of object `name`.
  virtual std::string Locate(const std::string& name) const = 0;
  // Size in bytes of object `name`.
  virtual Result<uint64_t> Size(const std::string& name) = 0;
  // Read's `ready` (optional): called with an offset into dst before the
  // store writes there past where it last said; every byte it writes next
  // lies below that offset.  By then the caller has dst[0, upto) ready to be
  // written (a full-mode stream buffer backs its pages a few MiB ahead of
  // the receive, rather than all of a shard before asking for it, which
  // left the connection idle meanwhile).  A status other than OK ends the
  // read with that status, not retried.
  using ReadReady = std::function<Status(uint64_t upto)>;
  // Bytes [offset, offset + n) of `name` into dst (an HTTP range request).
  // crc32c (optional): out, the CRC-32C of those n bytes, computed piece by
  // piece as they arrive (while they are still in the CPU's cache).
  virtual Status Read(const std::string& name, uint64_t offset, uint64_t n, void* dst,
                      uint32_t* crc32c = nullptr, const ReadReady* ready = nullptr) = 0;
  // The whole of `name` appended to file descriptor `fd` from its current
  // size on (a retry resumes where the last attempt stopped; a second call
  // after a failure resumes too).  expected_size (0: unknown) is checked.
  // *bytes: the object's size.  crc32c (optional): in, the CRC-32C of the
  // bytes `fd` holds already; out, of the whole object, computed while it
  // was written (no second pass).
  virtual Status Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                          uint32_t* crc32c = nullptr) = 0;
  // The whole of `name` (an index file).  NotFound when there is no such
  // object (S3; a directory's ENOENT and HTTP's 404 are IOError and
  // InvalidArgument).
  virtual Result<std::string> ReadAll(const std::string& name) = 0;
  // The objects directly under the store's root, by name (S3: every page of
  // ListObjectsV2).  InvalidArgument where the store cannot list (HTTP).
  virtual Result<std::vector<StoreObject>> List();
  // How many connections (fetcher threads) suit this store when the caller
  // does not say: 2 for a directory or an HTTP server, 8 for AWS S3 (each
  // connection to S3 carries a part of what the network can).
  virtual uint32_t PreferredConnections() const { return 2; }
  // Whether the store's server runs on this machine (an http:// or s3://
  // store at localhost, a loopback address or one of this machine's own):
  // it then shares the cores with the fetchers (StreamingDataset keeps them
  // apart).  False for a directory: no server.
  virtual bool ServerOnThisMachine() const { return false; }
  // Counters: requests made and retried, bytes received, and of those the
  // bytes a range read received straight into the caller's memory (HTTP's and
  // S3's reads over plain http://: no copy out of libcurl's buffer).
  uint64_t requests() const { return requests_; }
  uint64_t retries() const { return retries_; }
  uint64_t bytes_received() const { return bytes_; }
  uint64_t bytes_in_place() const { return bytes_in_place_; }

 protected:
  explicit Store(std::string url) : url_(std::move(url)) {}
  std::string url_;
  uint64_t requests_ = 0, retries_ = 0, bytes_ = 0, bytes_in_place_ = 0;
};

// Defined in the remote component (stoker::remote, libstoker_remote.a):
// registers its stores for http://, https:// and s3:// with
// Store::RegisterScheme.  A C++ program calls it once before opening such a
// URL (a program that does not link the component fails to link, saying so).
void RegisterRemoteStores();

}  // namespace stoker

#endif  // STOKER_STORE_H_
