#include "store/request_capture.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker {

struct RequestCaptureCallbacks {
  // Every address libcurl would try (IPv6 and IPv4 alike) becomes the listener's.
  static curl_socket_t Open(void* self, curlsocktype, curl_sockaddr* address) {
    auto* c = static_cast<RequestCapture*>(self);
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return CURL_SOCKET_BAD;
    address->family = AF_INET;
    address->socktype = SOCK_STREAM;
    address->protocol = IPPROTO_TCP;
    address->addrlen = sizeof c->at_;
    std::memcpy(&address->addr, &c->at_, sizeof c->at_);
    return fd;
  }
  static int Debug(CURL*, curl_infotype type, char* data, size_t size, void* self) {
    auto* c = static_cast<RequestCapture*>(self);
    if (type == CURLINFO_HEADER_OUT) {
      c->head_.assign(data, size);
      c->DropPending();  // libcurl's read of the answer ends now, not at a timeout
    }
    return 0;
  }
};

RequestCapture::~RequestCapture() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (listener_ >= 0) close(listener_);
}

Status RequestCapture::Listen() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::IOError("socket for signing requests", errno);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) != 0 || listen(fd, 8) != 0) {
    const int err = errno;
    close(fd);
    return Status::IOError("a listener on 127.0.0.1 for signing requests", err);
  }
  listener_ = fd;
  at_ = at;
  return Status::OK();
}

void RequestCapture::DropPending() {
  for (;;) {
    const int s = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: none left
    }
    close(s);  // the request unread: the kernel resets the connection
  }
}

Result<std::string> RequestCapture::Get(const std::string& url, const std::string& range,
                                        const std::function<void(void*, curl_slist**)>& prepare) {
  if (!failed_.ok()) return failed_;
  if (listener_ < 0 && !(failed_ = Listen()).ok()) return failed_;
  if (!curl_ && !(curl_ = curl_easy_init())) return failed_ = Status::Internal("curl_easy_init failed");
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  head_.clear();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // the request in origin form, whatever the environment says
  curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);  // (the listener drops it at once; a bound, not a wait)
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, RequestCaptureCallbacks::Open);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, this);
  curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, RequestCaptureCallbacks::Debug);
  curl_easy_setopt(c, CURLOPT_DEBUGDATA, this);
  curl_easy_setopt(c, CURLOPT_VERBOSE, 1L);  // (the debug callback is called only so)
  curl_slist* headers = nullptr;
  prepare(c, &headers);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl_easy_perform(c);  // fails: the connection is dropped unanswered
  if (headers) curl_slist_free_all(headers);
  DropPending();  // a second address's connection (IPv6 and IPv4 both tried)
  if (head_.size() < 4 || head_.compare(head_.size() - 4, 4, "\r\n\r\n") != 0)
    return failed_ = Status::Internal("libcurl wrote no request for " + url + " (" + curl_easy_strerror(rc) + ")");
  return head_;
}

}  // namespace stoker
