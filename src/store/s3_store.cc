#include "store/s3_store.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "store/s3_xml.h"

namespace stoker {

namespace {

// SHA-256 of an empty body: every request here is a GET or HEAD.  S3 wants
// the payload's hash in x-amz-content-sha256; libcurl signs it as a header.
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-' || c == '_'))
      return false;
  return true;
}

}  // namespace

std::string S3Store::Encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Status S3Store::SplitUrl(const std::string& url, std::string* bucket, std::string* prefix) {
  if (url.rfind("s3://", 0) != 0) return Status::InvalidArgument("'" + url + "' is not an s3:// URL");
  std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  *bucket = rest.substr(0, slash);
  std::string p = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!p.empty() && p.back() == '/') p.pop_back();
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  *prefix = p;
  if (!ValidBucket(*bucket))
    return Status::InvalidArgument("store URL '" + url + "': '" + *bucket +
                                   "' is not a bucket name (3 to 63 lowercase letters, digits, '.', '-'); "
                                   "the form is s3://bucket/prefix");
  return Status::OK();
}

S3Store::S3Store(std::string url, std::string base, const StoreOptions& o, S3Config c, std::string bucket,
                 std::string prefix, std::string bucket_url)
    : HttpStore(std::move(url), std::move(base), o, /*in_place=*/true),
      config_(std::move(c)),
      bucket_(std::move(bucket)),
      prefix_(std::move(prefix)),
      bucket_url_(std::move(bucket_url)),
      sigv4_("aws:amz:" + config_.region + ":s3") {}

Result<std::unique_ptr<S3Store>> S3Store::Create(const std::string& url, const StoreOptions& options) {
  return Create(url, options, [](const char* name) -> const char* { return std::getenv(name); });
}

Result<std::unique_ptr<S3Store>> S3Store::Create(const std::string& url, const StoreOptions& options,
                                                 const EnvLookup& env) {
  std::string bucket, prefix;
  STOKER_RETURN_IF_ERROR(SplitUrl(url, &bucket, &prefix));
  STOKER_ASSIGN_OR_RETURN(S3Config c, ResolveS3Config(options.s3, env));
  // Path-style on an endpoint of one's own; virtual-hosted on AWS, except for
  // bucket names with dots (TLS's wildcard certificate does not cover them).
  std::string bucket_url;
  if (!c.endpoint.empty())
    bucket_url = c.endpoint + "/" + bucket;
  else if (bucket.find('.') != std::string::npos)
    bucket_url = "https://s3." + c.region + ".amazonaws.com/" + bucket;
  else
    bucket_url = "https://" + bucket + ".s3." + c.region + ".amazonaws.com";
  const std::string base = prefix.empty() ? bucket_url : bucket_url + "/" + Encode(prefix, true);
  std::unique_ptr<S3Store> s(new S3Store(url, base, options, std::move(c), bucket, prefix, bucket_url));
  if (!s->ready()) return Status::Internal("curl_easy_init failed");
  return s;
}

std::string S3Store::Locate(const std::string& name) const { return base() + "/" + Encode(name, true); }

void S3Store::Prepare(void* curl, curl_slist** headers) {
  if (config_.access_key_id.empty()) return;  // unsigned (a public bucket)
  CURL* c = static_cast<CURL*>(curl);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(c, CURLOPT_USERNAME, config_.access_key_id.c_str());
  curl_easy_setopt(c, CURLOPT_PASSWORD, config_.secret_access_key.c_str());
  *headers = curl_slist_append(*headers, (std::string("x-amz-content-sha256: ") + kEmptySha256).c_str());
  if (!config_.session_token.empty())
    *headers = curl_slist_append(*headers, ("x-amz-security-token: " + config_.session_token).c_str());
}

Result<std::string> S3Store::InPlaceRequest(const std::string& url, const std::string& range) {
  if (config_.access_key_id.empty()) return std::string();  // unsigned: HttpRangeGet's plain GET
  return signed_.Get(url, range, [this](void* curl, curl_slist** headers) { Prepare(curl, headers); });
}

std::string S3Store::Describe(const std::string& url) const {
  // The bucket's own URL (a listing: bucket_url_?list-type=2...) names the
  // bucket; an object's, its key.
  std::string key = url.substr(0, url.find('?'));
  if (key == bucket_url_) key.clear();
  else if (key.rfind(bucket_url_ + "/", 0) == 0) key = key.substr(bucket_url_.size() + 1);
  // Percent-decoding for the message.
  std::string plain;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '%' && i + 2 < key.size()) {
      plain += static_cast<char>(std::strtol(key.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      plain += key[i];
    }
  }
  return "s3://" + bucket_ + "/" + plain;
}

bool S3Store::Transient(const Response& r) {
  if (HttpStore::Transient(r)) return true;  // connection trouble, 408, 429, 5xx (SlowDown is a 503)
  const std::string code = ParseS3Error(r.body).code;
  return code == "RequestTimeout" || code == "SlowDown" || code == "InternalError" ||
         code == "RequestTimeTooSkewed" || code == "ServiceUnavailable";
}

Status S3Store::Failure(const Response& r, const std::string& url) {
  if (r.code != CURLE_OK) return HttpStore::Failure(r, url);
  S3Error e = ParseS3Error(r.body);
  const std::string where = Describe(url);
  if (e.code.empty()) {  // a HEAD's answer has no body: name what the status means
    if (r.status == 404) e.code = "NoSuchKey or NoSuchBucket";
    else if (r.status == 403) e.code = "AccessDenied or SignatureDoesNotMatch";
    else if (r.status == 301) e.code = "PermanentRedirect";
  }
  std::string msg = where + ": " + (e.code.empty() ? "" : e.code + " ") + "(HTTP " + std::to_string(r.status) + ")" +
                    (e.message.empty() ? "" : ": " + e.message);
  const std::string& creds = config_.credentials_from;
  if (r.status == 403) {
    msg += config_.access_key_id.empty()
               ? "; no AWS credentials were found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile in "
                 "~/.aws/credentials, or the store's options), so the request went unsigned"
               : "; signed with access key " + config_.access_key_id + " from " + creds + ", region " +
                     config_.region + ": check the key, its secret and the bucket's policy";
  } else if (r.status == 301 || e.code == "PermanentRedirect" || e.code == "AuthorizationHeaderMalformed") {
    msg += "; the bucket is in another region than " + config_.region + " (set AWS_REGION)";
  }
  if (r.status == 404) return Status::NotFound(msg);
  return Status::IOError(msg);
}

Result<std::vector<StoreObject>> S3Store::List() {
  std::vector<StoreObject> all;
  const std::string dir = prefix_.empty() ? "" : prefix_ + "/";
  std::string token;
  for (int page = 0;; ++page) {
    // The query's parameters sorted and encoded: the form SigV4 signs.
    std::string q;
    if (!token.empty()) q += "continuation-token=" + Encode(token, false) + "&";
    q += "delimiter=%2F&list-type=2";
    if (!dir.empty()) q += "&prefix=" + Encode(dir, false);
    STOKER_ASSIGN_OR_RETURN(std::string body,
                            GetAll(bucket_url_ + "?" + q, "ListObjectsV2 of s3://" + bucket_ + "/" + dir));
    STOKER_ASSIGN_OR_RETURN(S3ListPage p, ParseS3ListPage(body));
    for (StoreObject& o : p.objects) {
      if (o.name.compare(0, dir.size(), dir) != 0) continue;
      o.name = o.name.substr(dir.size());
      if (!o.name.empty()) all.push_back(std::move(o));
    }
    if (!p.truncated) break;
    token = p.next_token;
  }
  std::sort(all.begin(), all.end(), [](const StoreObject& a, const StoreObject& b) { return a.name < b.name; });
  return all;
}

}  // namespace stoker
