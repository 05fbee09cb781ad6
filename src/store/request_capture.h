// RequestCapture: the request libcurl would send for a transfer's options,
// taken without sending it to the server.  S3Store uses it to have libcurl
// sign a range GET (CURLOPT_AWS_SIGV4: the signing stays libcurl's) whose
// body HttpRangeGet then receives straight into the caller's memory.
//
// How: the transfer's socket is pointed at a listener of this object's own on
// 127.0.0.1 (CURLOPT_OPENSOCKETFUNCTION may change the address).  libcurl
// connects there and writes the request; its debug callback hands over the
// header block as written, and the listener takes the connection and drops
// it, so libcurl's wait for an answer ends at once (about 0.1 ms in all).
// The request's Host header and target are the URL's, as if it had gone to
// the server.  Not for a proxy (the request line would be the proxy's form).
//
// One transfer at a time: one per store, as the store's own handle.
#ifndef STOKER_STORE_REQUEST_CAPTURE_H_
#define STOKER_STORE_REQUEST_CAPTURE_H_

#include <netinet/in.h>

#include <functional>
#include <string>

#include "stoker/status.h"

struct curl_slist;

namespace stoker {

class RequestCapture {
 public:
  RequestCapture() = default;
  ~RequestCapture();
  RequestCapture(const RequestCapture&) = delete;
  RequestCapture& operator=(const RequestCapture&) = delete;

  // The header block (request line, headers, the blank line) of a GET of
  // `url` for bytes `range` ("A-B"), with what `prepare` sets on the handle
  // and appends to its headers (HttpStore::Prepare's signature).  Once it
  // has failed (a libcurl whose debug callback never sees the request
  // waits for its timeout, 2 s), every later call fails at once with the
  // same error: the caller's other path serves.
  Result<std::string> Get(const std::string& url, const std::string& range,
                          const std::function<void(void* curl, curl_slist** headers)>& prepare);

 private:
  friend struct RequestCaptureCallbacks;  // libcurl's callbacks (request_capture.cc)
  Status Listen();
  void DropPending();  // closes every connection waiting on the listener

  int listener_ = -1;
  sockaddr_in at_{};
  void* curl_ = nullptr;
  std::string head_;  // the header block libcurl wrote
  Status failed_;     // the first failure, kept
};

}  // namespace stoker

#endif  // STOKER_STORE_REQUEST_CAPTURE_H_
