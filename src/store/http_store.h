// HttpStore: a Store over HTTP(S) with libcurl.  One easy handle per store
// (its connection is kept alive between requests), range requests, retries
// with exponential backoff on transient failures (connection refused or
// reset, timeouts, a response cut short, HTTP 408/429/5xx), a clear error
// naming the URL, the attempts and the last failure after the last try.
// Read over plain http:// (no proxy) receives into the caller's memory
// (HttpRangeGet), unless StoreOptions.receive_in_place is false.
//
// A store that speaks more than plain HTTP (S3Store) derives from it and
// fills in the hooks: how each request is signed, what a failed answer means
// and whether it is worth another attempt.
#ifndef STOKER_STORE_HTTP_STORE_H_
#define STOKER_STORE_HTTP_STORE_H_

#include <functional>
#include <memory>
#include <string>

struct curl_slist;

#include "store/http_range_get.h"

#include "stoker/store.h"

namespace stoker {

class HttpStore : public Store {
 public:
  static Result<std::unique_ptr<HttpStore>> Create(const std::string& url, const StoreOptions& options);
  ~HttpStore() override;
  std::string Locate(const std::string& name) const override { return base_ + "/" + name; }
  Result<uint64_t> Size(const std::string& name) override;
  Status Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c = nullptr,
              const ReadReady* ready = nullptr) override;
  Status Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                  uint32_t* crc32c = nullptr) override;
  Result<std::string> ReadAll(const std::string& name) override;
  bool ServerOnThisMachine() const override;  // base_'s host (store/server_host.h)

  // One attempt's outcome.
  struct Response {
    int code = 0;              // CURLcode
    long status = 0;
    std::string error;         // curl's message
    uint64_t total = 0;        // the object's size (Content-Range total, or Content-Length of a 200)
    bool has_total = false;
    bool local_error = false;  // the sink refused (e.g. a write failed)
    std::string body;          // an error answer's body (its first 64 KiB)
    double retry_after_s = -1; // Retry-After, seconds (-1: none)
  };

 protected:
  // base: the URL objects' names are appended to; in_place: Read may take
  // the HttpRangeGet path (over plain http://, with InPlaceRequest's request).
  HttpStore(std::string url, std::string base, const StoreOptions& o, bool in_place);
  // Sets what every request of this store needs (signing) on the curl handle
  // and appends its headers.
  virtual void Prepare(void* curl, curl_slist** headers) { (void)curl, (void)headers; }
  // The error for an answer that is not a success (a transport failure or an
  // HTTP status outside 2xx) to a request for `url`.
  virtual Status Failure(const Response& r, const std::string& url);
  // Whether that answer is worth another attempt.
  virtual bool Transient(const Response& r);
  // The request Read's in-place path (HttpRangeGet) sends for `url`'s bytes
  // `range` ("A-B"): empty for HttpRangeGet's own plain GET; a store whose
  // requests are signed makes it here.  An error: this attempt goes through
  // libcurl instead.
  virtual Result<std::string> InPlaceRequest(const std::string& url, const std::string& range) {
    (void)url, (void)range;
    return std::string();
  }
  // One request; `sink` takes body bytes (false: stop, a local error).
  Response Perform(const std::string& url, bool head, const std::string& range,
                   const std::function<bool(const char*, size_t)>& sink);
  // Runs `attempt` until it succeeds, fails for good, or attempts run out;
  // waits between attempts as StoreOptions says, or as long as the last
  // answer's Retry-After asked.
  Status WithRetries(const std::string& what, const std::function<Status(bool* transient)>& attempt);
  // The whole body of a GET of `url`, with retries (`what` names it in the
  // error): ReadAll's, and S3's listing.
  Result<std::string> GetAll(const std::string& url, const std::string& what);
  const std::string& base() const { return base_; }
  // False when libcurl could not make the handle (Create's error).
  bool ready() const { return curl_ != nullptr; }

 private:
  std::string base_;
  StoreOptions o_;
  void* curl_ = nullptr;
  double last_retry_after_s_ = -1;
  std::unique_ptr<HttpRangeGet> in_place_;  // Read's path over http:// (null: libcurl's)
};

}  // namespace stoker

#endif  // STOKER_STORE_HTTP_STORE_H_
