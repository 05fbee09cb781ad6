// store/request_capture: the request libcurl writes for a signed range GET,
// taken as written, without a byte reaching the URL's server.  That a server
// that checks signatures accepts it is tested against SeaweedFS
// (tests/python/test_s3.py).
#include "store/request_capture.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "watchdog.h"

namespace stoker {
namespace {

// A server that is never answered: its listener shows whether anything connected.
struct Silent {
  int fd = -1;
  int port = 0;
  Silent() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len), 0);
    EXPECT_EQ(listen(fd, 8), 0);
    port = ntohs(at.sin_port);
  }
  ~Silent() { close(fd); }
  bool Connected() const {  // a connection waits to be accepted
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
};

// What S3Store::Prepare sets: libcurl's SigV4 with a key and a secret.
auto Signed(const std::string& key, const std::string& secret) {
  return [key, secret](void* curl, curl_slist** headers) {
    CURL* c = static_cast<CURL*>(curl);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
    curl_easy_setopt(c, CURLOPT_USERNAME, key.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, secret.c_str());
    *headers = curl_slist_append(*headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  };
}

size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(RequestCapture, ASignedRangeGetAsLibcurlWritesItAndNothingSent) {
  testing::Watchdog dog(std::chrono::seconds(60), "RequestCapture");
  Silent server;
  RequestCapture capture;
  const std::string host = "127.0.0.1:" + std::to_string(server.port);
  auto got = capture.Get("http://" + host + "/bucket/a%20b/shard.tar", "5-99", Signed("AKEXAMPLE", "s3cret"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::string& req = *got;
  EXPECT_EQ(req.rfind("GET /bucket/a%20b/shard.tar HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("\r\nHost: " + host + "\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nRange: bytes=5-99\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKEXAMPLE/"), std::string::npos) << req;
  EXPECT_NE(req.find("SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nX-Amz-Date: "), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"), std::string::npos) << req;
  EXPECT_EQ(req.find("s3cret"), std::string::npos) << "the secret is in the request";
  EXPECT_EQ(req.substr(req.size() - 4), "\r\n\r\n");
  EXPECT_EQ(req.find("\r\n\r\n"), req.size() - 4) << "one header block";
  EXPECT_FALSE(server.Connected()) << "the request went to the URL's server";

  // Another secret, another signature; the same request otherwise.
  auto other = capture.Get("http://" + host + "/bucket/a%20b/shard.tar", "5-99", Signed("AKEXAMPLE", "other"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto signature = [](const std::string& r) { return r.substr(r.find("Signature="), 74); };
  EXPECT_NE(signature(req), signature(*other));
  EXPECT_FALSE(server.Connected());
}

TEST(RequestCapture, NamesThatResolveTwiceAProxyInTheEnvironmentAndNoLeaks) {
  testing::Watchdog dog(std::chrono::seconds(60), "RequestCapture");
  Silent server;
  RequestCapture capture;
  // localhost: libcurl may try ::1 and 127.0.0.1; both land on the capture's listener.
  auto got = capture.Get("http://localhost:" + std::to_string(server.port) + "/b/k", "0-0", Signed("AK", "s"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_NE(got->find("\r\nHost: localhost:" + std::to_string(server.port) + "\r\n"), std::string::npos) << *got;
  // A proxy in the environment: the request stays in origin form, as
  // HttpRangeGet sends it (HttpStore takes that path only without a proxy).
  setenv("http_proxy", "http://127.0.0.1:1", 1);
  got = capture.Get("http://127.0.0.1:" + std::to_string(server.port) + "/b/k", "0-9", Signed("AK", "s"));
  unsetenv("http_proxy");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->rfind("GET /b/k HTTP/1.1\r\n", 0), 0u) << *got;
  // Many in a row: every socket closed (libcurl's, the accepted ones).
  const size_t fds = OpenFds();
  for (int i = 0; i < 200; ++i) {
    got = capture.Get("http://127.0.0.1:" + std::to_string(server.port) + "/b/k" + std::to_string(i),
                      std::to_string(i) + "-" + std::to_string(i + 10), Signed("AK", "s"));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    ASSERT_NE(got->find("\r\nRange: bytes=" + std::to_string(i) + "-" + std::to_string(i + 10) + "\r\n"),
              std::string::npos);
  }
  EXPECT_EQ(OpenFds(), fds);
  EXPECT_FALSE(server.Connected());
}

TEST(RequestCapture, AFailureIsKeptAndTheNextCallsFailAtOnce) {
  testing::Watchdog dog(std::chrono::seconds(60), "RequestCapture");
  Silent server;
  RequestCapture capture;
  int prepared = 0;
  // A libcurl whose debug callback never sees the request (verbose off):
  // the capture waits out its bound, then says so.
  auto quiet = [&](void* curl, curl_slist** headers) {
    ++prepared;
    Signed("AK", "s")(curl, headers);
    curl_easy_setopt(static_cast<CURL*>(curl), CURLOPT_VERBOSE, 0L);
  };
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port) + "/b/k";
  auto got = capture.Get(url, "0-9", quiet);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("libcurl wrote no request for " + url), std::string::npos)
      << got.status().ToString();
  // Later calls: the same error, without another transfer.
  got = capture.Get(url, "0-9", Signed("AK", "s"));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("libcurl wrote no request"), std::string::npos);
  EXPECT_EQ(prepared, 1);
  EXPECT_FALSE(server.Connected());
}

}  // namespace
}  // namespace stoker
