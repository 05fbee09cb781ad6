// S3Store: a Store over S3 or an S3-compatible server, s3://bucket/prefix.
// It is an HttpStore whose requests libcurl signs (AWS SigV4,
// CURLOPT_AWS_SIGV4: no signing code here) with the credentials S3Config
// finds; whose failures are named by S3's error code, bucket and key
// (AccessDenied, SignatureDoesNotMatch, NoSuchBucket, NoSuchKey; never a
// secret); which retries SlowDown, InternalError and RequestTimeout as well
// as 5xx, waiting as long as Retry-After asks; and which lists the objects
// under its prefix (ListObjectsV2, every page).  Over plain http:// (a server
// of one's own) a range read's body is received in place, as HttpStore's is:
// libcurl signs the request (RequestCapture takes it as written) and
// HttpRangeGet sends it and receives the answer into the caller's memory.
// An error answer (403, 404, 503 SlowDown) is read there as well, and named
// and retried from its body as libcurl's would be.
#ifndef STOKER_STORE_S3_STORE_H_
#define STOKER_STORE_S3_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "store/http_store.h"
#include "store/request_capture.h"
#include "store/s3_config.h"

namespace stoker {

class S3Store : public HttpStore {
 public:
  static Result<std::unique_ptr<S3Store>> Create(const std::string& url, const StoreOptions& options);
  // As Create, with the environment from `env` (tests).
  static Result<std::unique_ptr<S3Store>> Create(const std::string& url, const StoreOptions& options,
                                                 const EnvLookup& env);
  std::string Locate(const std::string& name) const override;
  Result<std::vector<StoreObject>> List() override;
  uint32_t PreferredConnections() const override { return config_.endpoint.empty() ? 8 : 2; }
  const S3Config& config() const { return config_; }

  // s3://bucket/prefix -> bucket, prefix (no slashes around it).
  static Status SplitUrl(const std::string& url, std::string* bucket, std::string* prefix);
  // RFC 3986 percent-encoding of all but unreserved characters (and '/'
  // where keep_slash), as SigV4's canonical request wants it.
  static std::string Encode(const std::string& s, bool keep_slash);

 protected:
  void Prepare(void* curl, curl_slist** headers) override;
  Status Failure(const Response& r, const std::string& url) override;
  bool Transient(const Response& r) override;
  Result<std::string> InPlaceRequest(const std::string& url, const std::string& range) override;

 private:
  S3Store(std::string url, std::string base, const StoreOptions& o, S3Config c, std::string bucket,
          std::string prefix, std::string bucket_url);
  // The bucket/key a request URL of this store names, for messages.
  std::string Describe(const std::string& url) const;
  S3Config config_;
  std::string bucket_, prefix_;
  std::string bucket_url_;  // what ListObjectsV2's query goes on
  std::string sigv4_;       // CURLOPT_AWS_SIGV4's value
  RequestCapture signed_;   // libcurl's signed range GETs, for the in-place receive
};

}  // namespace stoker

#endif  // STOKER_STORE_S3_STORE_H_
