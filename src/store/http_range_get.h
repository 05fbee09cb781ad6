// HttpRangeGet: a range GET over plain http:// whose body is received
// straight into the caller's memory.  libcurl's write callback hands over
// bytes from its own buffer, so a body costs the kernel's copy into that
// buffer plus a memcpy out of it; here the kernel copies into `dst` and
// nothing else touches the bytes.  The stream buffers of StreamingDataset's
// full mode are filled this way (HttpStore::Read).
//
// libcurl still makes the connection (CURLOPT_CONNECT_ONLY: name resolution,
// connect timeout, its error messages); this class writes the request and
// reads the response with curl_easy_send / curl_easy_recv on it, and keeps
// the connection for the next request (HTTP/1.1 keep-alive).
//
// It takes the bytes in exactly one kind of answer: 206 with a Content-Range
// starting at the byte asked for, or 200 with a Content-Length when the range
// starts at 0, without Transfer-Encoding.  An error status (4xx, 5xx) with a
// Content-Length of at most 64 KiB is read whole and handed back (status,
// body, Retry-After) for the caller to name and to retry as it would
// libcurl's answer: an S3 SlowDown is not asked again at once.  Any other
// answer (a redirect, chunked encoding, a header block over 16 KiB, a larger
// error body) is `fallback`: the connection is dropped and the caller asks
// again through libcurl's full machinery, which follows it or names it.
// HTTPS and proxies are left to libcurl (HttpStore decides).
#ifndef STOKER_STORE_HTTP_RANGE_GET_H_
#define STOKER_STORE_HTTP_RANGE_GET_H_

#include <cstdint>
#include <ctime>
#include <functional>
#include <string>

#include "stoker/status.h"
#include "stoker/store.h"

namespace stoker {

// A Retry-After header's value in seconds (at most 600), or -1 where it is
// neither form RFC 9110 allows: a number of seconds, or an HTTP date (read
// by libcurl's curl_getdate; the seconds from `now` to it, 0 for a date
// already past).  Both of HttpStore's paths read it with this.
double RetryAfterSeconds(const char* value, time_t now = time(nullptr));

class HttpRangeGet {
 public:
  explicit HttpRangeGet(const StoreOptions& o) : o_(o) {}
  ~HttpRangeGet();
  HttpRangeGet(const HttpRangeGet&) = delete;
  HttpRangeGet& operator=(const HttpRangeGet&) = delete;

  struct Outcome {
    Status status;            // OK: all n bytes are in dst
    bool transient = false;   // worth another attempt (connection trouble, a body cut short)
    bool fallback = false;    // an answer this path leaves to libcurl (see above)
    bool ignored_range = false;  // 200 for a range that does not start at 0
    // An error answer (status OK, no bytes in dst): its HTTP status (0: none),
    // body and Retry-After in seconds (-1: none).
    long error_status = 0;
    std::string error_body;
    double retry_after_s = -1;
  };
  // GET `url` bytes [offset, offset + n) into dst.  `arrived(k)` is called
  // after each piece of k bytes lands (in order, at dst + the bytes before
  // it); on failure the bytes that arrived stay (a retry asks for the rest).
  // `ready` (optional; Store::ReadReady, offsets from dst) before a piece
  // lands past where it last said; its error ends the GET (not transient).
  // `request`: the request to send, header block and all, for these bytes
  // (a signed one: RequestCapture); empty, a plain GET made here.
  Outcome Get(const std::string& url, uint64_t offset, uint64_t n, uint8_t* dst,
              const std::function<void(size_t)>& arrived,
              const std::function<Status(uint64_t)>* ready = nullptr, const std::string& request = "");

 private:
  Status Connect(const std::string& url, bool* transient);
  void Drop();
  // Sends all of `req`; false: the connection is gone.
  bool SendAll(const std::string& req, std::string* error);
  // The connection's socket, or -1.
  int Socket() const;
  // Waits until the socket has `events` (POLLIN, POLLOUT); false after
  // stall_timeout_s.
  bool Wait(short events);
  // SO_RCVLOWAT: poll reports the socket readable once `bytes` are queued.
  void SetLowWater(size_t bytes);
  const StoreOptions o_;
  void* curl_ = nullptr;   // the CONNECT_ONLY handle, null when not connected
  std::string origin_;     // scheme://host:port of the connection
  int requests_on_connection_ = 0;
  size_t low_water_ = 1;   // the socket's SO_RCVLOWAT
};

}  // namespace stoker

#endif  // STOKER_STORE_HTTP_RANGE_GET_H_
