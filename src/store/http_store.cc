#include "store/http_store.h"

#include <curl/curl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "store/file_sink.h"
#include "store/server_host.h"
#include "core/copy.h"
#include "io/crc32c.h"

namespace stoker {

namespace {

constexpr size_t kMaxErrorBody = 64 << 10;

// The certificates https:// is checked against: SSL_CERT_FILE (as OpenSSL
// and Python read it), else the bundle where this distribution keeps it.
// A libcurl built on one distribution looks only where that one keeps it,
// and the one in the manylinux wheel (scripts/manylinux.sh) has no place
// built in at all.  Empty: libcurl's own default.
const std::string& CaBundle() {
  static const std::string path = [] {
    const char* env = std::getenv("SSL_CERT_FILE");
    if (env && *env) return std::string(env);
    for (const char* p : {"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Arch, Gentoo
                          "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // Fedora, RHEL 7 and later
                          "/etc/pki/tls/certs/ca-bundle.crt",                   // older RHEL, Amazon Linux
                          "/etc/ssl/ca-bundle.pem",                             // openSUSE
                          "/etc/ssl/cert.pem"})                                 // Alpine
      if (access(p, R_OK) == 0) return std::string(p);
    return std::string();
  }();
  return path;
}

struct Sink {
  const std::function<bool(const char*, size_t)>* fn;
  CURL* curl;
  std::string* error_body;
  bool failed = false;
};

size_t WriteCb(char* p, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  long status = 0;
  curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {  // an error page is not the object's bytes: kept to name the error
    s->error_body->append(p, std::min(size * n, kMaxErrorBody - std::min(kMaxErrorBody, s->error_body->size())));
    return size * n;
  }
  if (!(*s->fn)(p, size * n)) {
    s->failed = true;
    return 0;
  }
  return size * n;
}

size_t HeaderCb(char* p, size_t size, size_t n, void* user) {
  auto* r = static_cast<HttpStore::Response*>(user);
  const std::string line(p, size * n);
  // Content-Range: bytes 0-99/1234
  if (line.size() > 14 && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && slash + 1 < line.size() && line[slash + 1] != '*') {
      r->total = std::strtoull(line.c_str() + slash + 1, nullptr, 10);
      r->has_total = true;
    }
  }
  // Retry-After: 3
  if (line.size() > 12 && strncasecmp(line.c_str(), "retry-after:", 12) == 0) {
    if (const double v = RetryAfterSeconds(line.c_str() + 12); v >= 0) r->retry_after_s = v;
  }
  return size * n;
}

std::string Describe(const HttpStore::Response& r) {
  if (r.code == CURLE_PEER_FAILED_VERIFICATION || r.code == CURLE_SSL_CACERT_BADFILE)
    return r.error + " (curl error " + std::to_string(r.code) + "): the server's certificate was checked against " +
           (CaBundle().empty() ? std::string("libcurl's default CA bundle") : CaBundle()) +
           "; set SSL_CERT_FILE to a bundle that holds the CA that signed it";
  if (r.code != CURLE_OK) return r.error + " (curl error " + std::to_string(r.code) + ")";
  return "HTTP " + std::to_string(r.status);
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

bool HttpStore::Transient(const Response& r) {
  if (r.local_error) return false;
  if (r.code != CURLE_OK) {
    switch (static_cast<CURLcode>(r.code)) {
      case CURLE_URL_MALFORMAT: case CURLE_UNSUPPORTED_PROTOCOL: case CURLE_SSL_CACERT_BADFILE:
      case CURLE_PEER_FAILED_VERIFICATION: case CURLE_WRITE_ERROR:
        return false;
      default:
        return true;  // connect, resolve, timeout, partial file, recv/send errors...
    }
  }
  return r.status == 408 || r.status == 429 || r.status >= 500;
}

Status HttpStore::Failure(const Response& r, const std::string& url) {
  if (r.code == CURLE_OK && r.status == 404)
    return Status::InvalidArgument(url + ": no such object on the store (HTTP 404)");
  return Status::IOError(Describe(r));
}

HttpStore::HttpStore(std::string url, std::string base, const StoreOptions& o, bool in_place)
    : Store(std::move(url)), base_(std::move(base)), o_(o) {
  GlobalInit();
  curl_ = curl_easy_init();
  // A proxy from the environment is libcurl's business (its request line and
  // CONNECT differ); so is TLS, whose bytes are decrypted into a buffer anyway.
  bool proxied = false;
  for (const char* v : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    const char* e = std::getenv(v);
    proxied = proxied || (e && *e);
  }
  if (in_place && o.receive_in_place && !proxied && base_.compare(0, 7, "http://") == 0)
    in_place_ = std::make_unique<HttpRangeGet>(o);
}

Result<std::unique_ptr<HttpStore>> HttpStore::Create(const std::string& url, const StoreOptions& options) {
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::unique_ptr<HttpStore> s(new HttpStore(url, base, options, /*in_place=*/true));
  if (!s->ready()) return Status::Internal("curl_easy_init failed");
  return s;
}

HttpStore::~HttpStore() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpStore::Response HttpStore::Perform(const std::string& url, bool head, const std::string& range,
                                       const std::function<bool(const char*, size_t)>& sink) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // options only: the connection cache stays
  Response r;
  Sink s{&sink, c, &r.body};
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o_.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(o_.stall_timeout_s)));
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);  // fewer, larger writes (curl's default is 16 KiB)
  if (!CaBundle().empty()) curl_easy_setopt(c, CURLOPT_CAINFO, CaBundle().c_str());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  if (head) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  }
  if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_slist* headers = nullptr;
  Prepare(c, &headers);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  ++requests_;
  r.code = curl_easy_perform(c);
  if (headers) curl_slist_free_all(headers);
  r.local_error = s.failed;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  if (r.code != CURLE_OK) r.error = err[0] ? err : curl_easy_strerror(static_cast<CURLcode>(r.code));
  last_retry_after_s_ = r.retry_after_s;
  if (!r.has_total && r.code == CURLE_OK && r.status == 200) {
    curl_off_t len = -1;
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    if (len >= 0) r.total = static_cast<uint64_t>(len), r.has_total = true;
  }
  return r;
}

Status HttpStore::WithRetries(const std::string& what, const std::function<Status(bool* transient)>& attempt) {
  const auto start = std::chrono::steady_clock::now();
  double wait = o_.backoff_s;
  Status last;
  for (int i = 1; i <= std::max(1, o_.attempts); ++i) {
    bool transient = false;
    last_retry_after_s_ = -1;
    last = attempt(&transient);
    if (last.ok() || !transient) return last;
    if (i == o_.attempts) break;
    ++retries_;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(wait, last_retry_after_s_)));
    wait = std::min(wait * 2, o_.max_backoff_s);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", took);
  return Status::IOError(what + " failed after " + std::to_string(o_.attempts) + " attempts over " + secs +
                             " s: " + last.message() + " (is the server up? the store's attempts option sets the tries)");
}

// Asked once, when a dataset opens (not by every connection's store): for an
// address that is not loopback it reads the machine's interfaces.
bool HttpStore::ServerOnThisMachine() const { return HostIsThisMachine(UrlHost(base_)); }

Result<uint64_t> HttpStore::Size(const std::string& name) {
  const std::string url = Locate(name);
  uint64_t size = 0;
  Status st = WithRetries("HEAD " + url, [&](bool* transient) -> Status {
    Response r = Perform(url, true, "", [](const char*, size_t) { return true; });
    *transient = Transient(r);
    if (r.code != CURLE_OK || r.status != 200) return Failure(r, url);
    if (!r.has_total) return Status::IOError(url + ": the server sent no Content-Length");
    size = r.total;
    return Status::OK();
  });
  if (!st.ok()) return st;
  return size;
}

Status HttpStore::Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c,
                       const ReadReady* ready) {
  const std::string url = Locate(name);
  auto* out = static_cast<char*>(dst);
  uint64_t got = 0;     // kept across attempts: a retry asks for the rest
  uint64_t summed = 0;  // out[0, summed) is in crc
  uint64_t in_place = 0;  // of out[0, got), the bytes HttpRangeGet received
  uint32_t crc = 0;
  // The CRC follows the bytes in pieces of at least this much: large enough
  // for its three-stream loop, small enough to still be in the CPU's cache.
  constexpr uint64_t kCrcPiece = 256 << 10;
  auto done = [&] {  // all n bytes are in: the rest of the CRC
    if (crc32c) *crc32c = Crc32cExtend(crc, out + summed, got - summed);
    bytes_ += n;
    bytes_in_place_ += in_place;
    return Status::OK();
  };
  return WithRetries("GET " + url + " bytes " + std::to_string(offset) + "-" + std::to_string(offset + n - 1),
                     [&](bool* transient) -> Status {
    if (got == n) return done();  // an earlier attempt got every byte, then failed
    const std::string range = std::to_string(offset + got) + "-" + std::to_string(offset + n - 1);
    const uint64_t before = got;
    auto ignored = [&] {  // a 200 with the whole object: not our range
      return Status::IOError(url + ": the server does not answer range requests (HTTP 200 for bytes " + range + ")");
    };
    auto refused = [&](const Response& r) {  // an answer without the bytes: named, and worth another try or not
      *transient = Transient(r);
      if (r.code == CURLE_OK && r.status == 416)
        return Status::InvalidArgument(url + ": bytes " + range + " are past the end of the object (HTTP 416)");
      return Failure(r, url);
    };
    auto arrived = [&](size_t k) {  // out[got, got + k) came in
      got += k;
      if (crc32c && got - summed >= kCrcPiece) {
        crc = Crc32cExtend(crc, out + summed, got - summed);
        summed = got;
      }
    };
    Result<std::string> request = in_place_ ? InPlaceRequest(url, range) : Result<std::string>(std::string());
    if (in_place_ && request.ok()) {
      ++requests_;
      const uint64_t from = got;  // (Get's offsets are from out + from)
      const std::function<Status(uint64_t)> ready_here = [&](uint64_t upto) { return (*ready)(from + upto); };
      HttpRangeGet::Outcome r = in_place_->Get(url, offset + got, n - got, reinterpret_cast<uint8_t*>(out) + got,
                                               arrived, ready ? &ready_here : nullptr, *request);
      in_place += got - from;
      if (r.ignored_range) return ignored();
      if (r.error_status) {  // read in place: named and retried as libcurl's answer would be
        Response e;
        e.status = r.error_status;
        e.body = std::move(r.error_body);
        e.retry_after_s = last_retry_after_s_ = r.retry_after_s;
        return refused(e);
      }
      if (!r.fallback) {
        *transient = r.transient;
        if (!r.status.ok()) return r.status;
        return done();
      }
      // An answer left to libcurl (a redirect, chunked...): ask again through it.
    }
    CURL* c = static_cast<CURL*>(curl_);
    bool ignored_range = false;
    Status not_ready;  // `ready` said no: the transfer stops
    Response r = Perform(url, false, range, [&](const char* p, size_t k) {
      long status = 0;
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
      if (status == 200 && offset + before > 0) {  // the whole object, not our range
        ignored_range = true;
        return false;
      }
      k = static_cast<size_t>(std::min<uint64_t>(k, n - got));
      // The CRC from libcurl's buffer, which is in the cache, then a copy
      // that leaves the cache alone (core/copy.h): the shard is
      // read by a reader thread once it is all in, long after these bytes
      // would have left this core's cache.
      if (ready && !(not_ready = (*ready)(got + k)).ok()) return false;
      if (crc32c) {
        crc = Crc32cExtend(Crc32cExtend(crc, out + summed, got - summed), p, k);
        summed = got + k;
      }
      StreamCopy(out + got, p, k);
      got += k;
      return true;  // bytes past n (a 200 from byte 0) are dropped, not an error
    });
    if (ignored_range) return ignored();
    if (!not_ready.ok()) return not_ready;
    if (r.code != CURLE_OK || (r.status != 206 && r.status != 200)) return refused(r);
    *transient = r.status == 206 && got < n;
    if (got < n) return Status::IOError("the response ended after " + std::to_string(got) + " of " +
                                        std::to_string(n) + " bytes");
    return done();
  });
}

Status HttpStore::Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                           uint32_t* crc32c) {
  const std::string url = Locate(name);
  return WithRetries("GET " + url, [&](bool* transient) -> Status {
    struct stat st {};
    if (fstat(fd, &st) != 0) return Status::IOError("fstat of the download target of " + url, errno);
    uint64_t at = static_cast<uint64_t>(st.st_size);
    if (expected_size && at == expected_size) {
      *bytes = at;
      return Status::OK();
    }
    const uint64_t start = at;
    FileSink sink(fd, at, "the download of " + url, crc32c);
    Status write_error;
    Response r = Perform(url, false, at ? std::to_string(at) + "-" : "", [&](const char* p, size_t k) {
      write_error = sink.Append(p, k);
      bytes_ += k;
      return write_error.ok();
    });
    if (write_error.ok()) write_error = sink.Flush();  // what arrived stays, for a resume
    if (!write_error.ok()) return write_error;
    at = sink.at();
    if (r.status == 200 && start > 0 && r.code == CURLE_OK) {
      // The server ignored the range and sent it all from byte 0 after our
      // partial bytes: start over.
      if (ftruncate(fd, 0) != 0) return Status::IOError("truncate of the download target of " + url, errno);
      if (crc32c) *crc32c = 0;
      *transient = true;
      return Status::IOError("the server ignored the range request; downloading again from the start");
    }
    if (r.status == 416 && expected_size == 0 && start > 0) {  // we already had all of it
      *bytes = start;
      return Status::OK();
    }
    *transient = Transient(r);
    if (r.code != CURLE_OK || (r.status != 200 && r.status != 206)) return Failure(r, url);
    const uint64_t total = r.has_total ? r.total : at;
    if (expected_size && total != expected_size)
      return Status::DataLoss(url + " has " + std::to_string(total) + " bytes, the index says " +
                              std::to_string(expected_size));
    if (at != total) {
      *transient = true;  // the response was cut short: resume from `at`
      return Status::IOError("the response ended after " + std::to_string(at) + " of " + std::to_string(total) +
                             " bytes");
    }
    *bytes = total;
    return Status::OK();
  });
}

Result<std::string> HttpStore::ReadAll(const std::string& name) { return GetAll(Locate(name), "GET " + Locate(name)); }

Result<std::string> HttpStore::GetAll(const std::string& url, const std::string& what) {
  std::string out;
  Status st = WithRetries(what, [&](bool* transient) -> Status {
    out.clear();
    Response r = Perform(url, false, "", [&](const char* p, size_t k) {
      out.append(p, k);
      return true;
    });
    *transient = Transient(r);
    if (r.code != CURLE_OK || r.status != 200) return Failure(r, url);
    if (r.has_total && out.size() != r.total) {
      *transient = true;
      return Status::IOError("the response ended after " + std::to_string(out.size()) + " of " +
                             std::to_string(r.total) + " bytes");
    }
    bytes_ += out.size();
    return Status::OK();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace stoker
