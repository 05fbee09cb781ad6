#include "store/http_range_get.h"

#include <curl/curl.h>
#include <poll.h>
#include <sys/socket.h>
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace stoker {

namespace {

constexpr size_t kMaxHeader = 16 << 10;     // a larger header block goes to libcurl
constexpr uint64_t kMaxErrorBody = 64 << 10;  // so does a larger error answer
// Each receive asks for at most this much, so that the caller's CRC over a
// piece finds it still in the CPU's cache.
constexpr size_t kPiece = 256 << 10;

struct UrlParts {
  std::string origin, host_header, target;
};

bool Split(const std::string& url, UrlParts* out) {
  CURLU* u = curl_url();
  if (!u) return false;
  bool ok = curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK;
  char *scheme = nullptr, *host = nullptr, *port = nullptr, *path = nullptr, *query = nullptr;
  ok = ok && curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
       curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
       curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
       curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK;
  if (ok) {
    const bool has_query = curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK && query;
    out->origin = std::string(scheme) + "://" + host + ":" + port;
    char* given_port = nullptr;  // Host: as in the URL (no port when it had none)
    const bool explicit_port = curl_url_get(u, CURLUPART_PORT, &given_port, 0) == CURLUE_OK && given_port;
    out->host_header = std::string(host) + (explicit_port ? std::string(":") + given_port : "");
    out->target = std::string(path) + (has_query ? std::string("?") + query : "");
    curl_free(given_port);
  }
  for (char* p : {scheme, host, port, path, query}) curl_free(p);
  curl_url_cleanup(u);
  return ok;
}

// The value of header `name` in the block (lines after the status line), or
// false.  Names compare without case; values lose surrounding blanks.
bool HeaderValue(const std::string& block, const char* name, std::string* value) {
  const size_t len = std::strlen(name);
  size_t at = block.find("\r\n");
  while (at != std::string::npos && at + 2 < block.size()) {
    const size_t start = at + 2;
    const size_t end = block.find("\r\n", start);
    if (end == std::string::npos || end == start) break;
    if (end - start > len && block[start + len] == ':' && strncasecmp(block.c_str() + start, name, len) == 0) {
      size_t b = start + len + 1, e = end;
      while (b < e && (block[b] == ' ' || block[b] == '\t')) ++b;
      while (e > b && (block[e - 1] == ' ' || block[e - 1] == '\t')) --e;
      *value = block.substr(b, e - b);
      return true;
    }
    at = end;
  }
  return false;
}

bool ParseU64(const std::string& s, uint64_t* v) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

}  // namespace

double RetryAfterSeconds(const char* value, time_t now) {
  char* end = nullptr;
  const double s = std::strtod(value, &end);
  if (end != value) return s >= 0 ? std::min(s, 600.0) : -1;
  std::string date(value);  // (a header line's rest: spaces and CRLF around it)
  const size_t from = date.find_first_not_of(" \t");
  const size_t to = date.find_last_not_of(" \t\r\n");
  if (from == std::string::npos) return -1;
  const time_t at = curl_getdate(date.substr(from, to - from + 1).c_str(), nullptr);
  if (at == -1) return -1;
  return std::min(600.0, static_cast<double>(std::max<time_t>(0, at - now)));
}

HttpRangeGet::~HttpRangeGet() { Drop(); }

void HttpRangeGet::Drop() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
  curl_ = nullptr;
  origin_.clear();
  requests_on_connection_ = 0;
  low_water_ = 1;
}

Status HttpRangeGet::Connect(const std::string& url, bool* transient) {
  Drop();
  CURL* c = curl_easy_init();
  if (!c) return Status::Internal("curl_easy_init failed");
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o_.connect_timeout_s * 1000));
  // curl_easy_recv hands out at most this much per call (its default is 16 KiB).
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, static_cast<long>(kPiece));
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(c);
    *transient = rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL;
    return Status::IOError(std::string(err[0] ? err : curl_easy_strerror(rc)) + " (curl error " +
                               std::to_string(static_cast<int>(rc)) + ")");
  }
  curl_ = c;
  return Status::OK();
}

int HttpRangeGet::Socket() const {
  curl_socket_t fd = CURL_SOCKET_BAD;
  curl_easy_getinfo(static_cast<CURL*>(curl_), CURLINFO_ACTIVESOCKET, &fd);
  return fd == CURL_SOCKET_BAD ? -1 : static_cast<int>(fd);
}

bool HttpRangeGet::Wait(short events) {
  const int fd = Socket();
  if (fd < 0) return false;
  pollfd p{fd, events, 0};
  const int ms = static_cast<int>(std::max(1.0, o_.stall_timeout_s) * 1000);
  int r;
  do r = poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  return r > 0;
}

void HttpRangeGet::SetLowWater(size_t bytes) {
  bytes = std::max<size_t>(1, bytes);
  if (bytes == low_water_) return;
  const int fd = Socket();
  const int v = static_cast<int>(bytes);
  // (advice: a kernel without it wakes for every write, as before)
  if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0) low_water_ = bytes;
}

bool HttpRangeGet::SendAll(const std::string& req, std::string* error) {
  CURL* c = static_cast<CURL*>(curl_);
  size_t sent = 0;
  while (sent < req.size()) {
    size_t k = 0;
    const CURLcode rc = curl_easy_send(c, req.data() + sent, req.size() - sent, &k);
    if (rc == CURLE_AGAIN) {
      if (Wait(POLLOUT)) continue;
      *error = "could not send the request (the connection stalled)";
      return false;
    }
    if (rc != CURLE_OK) {
      *error = std::string("could not send the request: ") + curl_easy_strerror(rc);
      return false;
    }
    sent += k;
  }
  return true;
}

HttpRangeGet::Outcome HttpRangeGet::Get(const std::string& url, uint64_t offset, uint64_t n, uint8_t* dst,
                                        const std::function<void(size_t)>& arrived,
                                        const std::function<Status(uint64_t)>* ready,
                                        const std::string& request) {
  Outcome out;
  if (n == 0) return out;
  UrlParts parts;
  if (!Split(url, &parts)) {
    out.fallback = true;  // libcurl names what is wrong with it
    return out;
  }
  std::string req = request;
  if (req.empty())
    req = "GET " + parts.target + " HTTP/1.1\r\nHost: " + parts.host_header + "\r\nRange: bytes=" +
          std::to_string(offset) + "-" + std::to_string(offset + n - 1) +
          "\r\nUser-Agent: stoker\r\nAccept: */*\r\nAccept-Encoding: identity\r\n\r\n";
  // A kept-alive connection the server has closed since shows up as a failed
  // send or an end of stream before any byte of the answer: once, connect
  // again and ask again.
  std::string head;
  for (int round = 0;; ++round) {
    if (curl_ && origin_ != parts.origin) Drop();
    if (!curl_) {
      out.status = Connect(url, &out.transient);
      if (!out.status.ok()) return out;
      origin_ = parts.origin;
    }
    const bool reused = requests_on_connection_ > 0;
    ++requests_on_connection_;
    std::string error;
    bool answered = false, timed_out = false;
    if (SendAll(req, &error)) {
      head.clear();
      char buf[4096];
      for (;;) {
        size_t k = 0;
        const CURLcode rc = curl_easy_recv(static_cast<CURL*>(curl_), buf, sizeof buf, &k);
        if (rc == CURLE_AGAIN) {
          if (!Wait(POLLIN)) {
            error = "no answer within " + std::to_string(static_cast<int>(o_.stall_timeout_s)) +
                    " s (the store's stall_timeout_s option)";
            timed_out = true;
            break;
          }
          continue;
        }
        if (rc != CURLE_OK || k == 0) {
          error = rc != CURLE_OK ? std::string("receive failed: ") + curl_easy_strerror(rc)
                                 : "the server closed the connection";
          break;
        }
        answered = true;
        head.append(buf, k);
        if (head.find("\r\n\r\n") != std::string::npos) break;
        if (head.size() > kMaxHeader) {
          Drop();
          out.fallback = true;
          return out;
        }
      }
      if (head.find("\r\n\r\n") != std::string::npos) break;
    }
    Drop();
    if (reused && !answered && !timed_out && round == 0) continue;
    out.status = Status::IOError(error);
    out.transient = true;
    return out;
  }

  const size_t end = head.find("\r\n\r\n");
  const std::string block = head.substr(0, end + 2);
  std::string body_start = head.substr(end + 4);
  // Status line: HTTP/1.x NNN reason
  int status = 0;
  bool http11 = false;
  if (block.compare(0, 5, "HTTP/") == 0) {
    const size_t sp = block.find(' ');
    if (sp != std::string::npos) status = std::atoi(block.c_str() + sp + 1);
    http11 = block.compare(0, 8, "HTTP/1.1") == 0;
  }
  std::string v;
  uint64_t length = 0;
  const bool has_length = HeaderValue(block, "Content-Length", &v) && ParseU64(v, &length);
  bool usable = has_length && !HeaderValue(block, "Transfer-Encoding", &v);
  bool keep = http11;
  if (HeaderValue(block, "Connection", &v)) keep = strcasecmp(v.c_str(), "close") != 0;
  if (status >= 400 && status < 600 && usable && length <= kMaxErrorBody) {
    // An error answer: read its body (S3 names the error there) and leave
    // the connection ready for the next request.
    out.error_status = status;
    if (HeaderValue(block, "Retry-After", &v)) out.retry_after_s = RetryAfterSeconds(v.c_str());
    std::string& body = out.error_body;
    body = body_start.substr(0, length);
    while (body.size() < length) {
      char buf[4096];
      size_t k = 0;
      const CURLcode rc = curl_easy_recv(static_cast<CURL*>(curl_), buf,
                                         std::min<size_t>(sizeof buf, length - body.size()), &k);
      if (rc == CURLE_AGAIN && Wait(POLLIN)) continue;
      if (rc != CURLE_OK || k == 0) {
        keep = false;  // (the body cut short: what came names the error as well as it can)
        break;
      }
      body.append(buf, k);
    }
    if (!keep || body_start.size() > length) Drop();
    return out;
  }
  if (usable && status == 206) {
    // Content-Range: bytes A-B/T, A where we asked.
    usable = HeaderValue(block, "Content-Range", &v) && v.compare(0, 6, "bytes ") == 0;
    uint64_t first = 0;
    const size_t dash = usable ? v.find('-') : std::string::npos;
    usable = usable && dash != std::string::npos && ParseU64(v.substr(6, dash - 6), &first) && first == offset;
  } else if (status == 200 && offset > 0) {
    Drop();
    out.ignored_range = true;
    out.status = Status::IOError("the server does not answer range requests (HTTP 200)");
    return out;
  } else {
    usable = usable && status == 200;
  }
  if (!usable) {
    Drop();
    out.fallback = true;
    return out;
  }

  const uint64_t want = std::min(n, length);
  uint64_t got = std::min<uint64_t>(body_start.size(), want);
  uint64_t readied = 0;  // what `ready` has said dst has room for
  auto make_ready = [&](uint64_t upto) {
    if (!ready || upto <= readied) return true;
    out.status = (*ready)(upto);
    if (!out.status.ok()) {
      Drop();  // (the rest of the body is not read)
      return false;
    }
    readied = upto;
    return true;
  };
  if (got) {
    if (!make_ready(got)) return out;
    std::memcpy(dst, body_start.data(), got);
    arrived(got);
  }
  CURL* c = static_cast<CURL*>(curl_);
  bool waited_out = false;  // the last wait ended by the stall timeout
  while (got < want) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(want - got, kPiece));
    if (!make_ready(got + piece)) return out;
    // Wake when a whole piece is there, not for each of the server's writes
    // (nginx writes 32 KiB at a time: 8x the wakeups and receive calls).
    SetLowWater(piece);
    size_t k = 0;
    const CURLcode rc = curl_easy_recv(c, dst + got, piece, &k);
    if (rc == CURLE_AGAIN) {
      // A timeout with fewer bytes than the low-water mark waiting is not a
      // stall: look once more before calling it one.
      if (!waited_out) {
        waited_out = !Wait(POLLIN);
        continue;
      }
      Drop();
      out.status = Status::IOError("no bytes for " + std::to_string(static_cast<int>(o_.stall_timeout_s)) +
                                       " s after " + std::to_string(got) + " of " + std::to_string(n) +
                                       " (the store's stall_timeout_s option)");
      out.transient = true;
      return out;
    }
    waited_out = false;
    if (rc != CURLE_OK || k == 0) {
      Drop();
      out.status = Status::IOError("the response ended after " + std::to_string(got) + " of " + std::to_string(n) +
                                       " bytes" + (rc != CURLE_OK ? std::string(": ") + curl_easy_strerror(rc) : ""));
      out.transient = true;
      return out;
    }
    got += k;
    arrived(k);
  }
  if (curl_) SetLowWater(1);  // the next answer's header: wake for any byte
  // Bytes of the body left unread (a 200 for more than we asked for), or a
  // server that closes: this connection is not reused.
  if (!keep || length != want || body_start.size() > want) Drop();
  if (got < n) {  // a shorter range or object than asked for
    out.status = Status::IOError("the response ended after " + std::to_string(got) + " of " + std::to_string(n) +
                                     " bytes");
    out.transient = status == 206;
  }
  return out;
}

}  // namespace stoker
