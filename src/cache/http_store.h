// HttpStore: a Store over HTTP(S) with libcurl.  One easy handle per store
// (its connection is kept alive between requests), range requests, retries
// with exponential backoff on transient failures (connection refused or
// reset, timeouts, a response cut short, HTTP 408/429/5xx), a clear error
// naming the URL, the attempts and the last failure after the last try.
// Read over plain http:// (no proxy) receives into the caller's memory
// (HttpRangeGet), unless StoreOptions.receive_in_place is false.
#ifndef STOKER_CACHE_HTTP_STORE_H_
#define STOKER_CACHE_HTTP_STORE_H_

#include <functional>
#include <memory>
#include <string>

#include "cache/http_range_get.h"

#include "stoker/store.h"

namespace stoker {

class HttpStore : public Store {
 public:
  static Result<std::unique_ptr<HttpStore>> Create(const std::string& url, const StoreOptions& options);
  ~HttpStore() override;
  std::string Locate(const std::string& name) const override { return base_ + "/" + name; }
  Result<uint64_t> Size(const std::string& name) override;
  Status Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c = nullptr) override;
  Status Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                  uint32_t* crc32c = nullptr) override;
  Result<std::string> ReadAll(const std::string& name) override;

  struct Response;  // one attempt's outcome (http_store.cc)

 private:
  HttpStore(std::string url, std::string base, const StoreOptions& o) : Store(std::move(url)), base_(std::move(base)), o_(o) {}
  // One request; `sink` takes body bytes (false: stop, a local error).
  Response Perform(const std::string& url, bool head, const std::string& range,
                   const std::function<bool(const char*, size_t)>& sink);
  // Runs `attempt` until it succeeds, fails for good, or attempts run out.
  Status WithRetries(const std::string& what, const std::function<Status(bool* transient)>& attempt);
  std::string base_;
  StoreOptions o_;
  void* curl_ = nullptr;
  std::unique_ptr<HttpRangeGet> in_place_;  // Read's path over http:// (null: libcurl's)
};

}  // namespace stoker

#endif  // STOKER_CACHE_HTTP_STORE_H_
