// store/http_range_get over a real nginx: a range received in place, in
// pieces, on one kept-alive connection; answers it does not handle (an
// error status, a redirect) are left to libcurl; a refused connection is
// worth another try.
#include "store/http_range_get.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "nginx_server.h"
#include "test_files.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::NginxServer;
using testing::TempPath;
using testing::WriteFile;

TEST(HttpRangeGet, RangesInPlaceAndWhatItLeavesToLibcurl) {
  if (!NginxServer::Installed()) GTEST_SKIP() << "nginx is not installed (scripts/run.sh installs it)";
  testing::Watchdog dog(std::chrono::seconds(60), "HttpRangeGet");
  const std::string root = TempPath("range_root");
  std::filesystem::create_directories(root);
  std::string data(2 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  WriteFile(root + "/obj.bin", data);
  auto server = std::make_unique<NginxServer>(TempPath("range_nginx"), root);
  ASSERT_TRUE(server->Start());
  HttpRangeGet get(StoreOptions{});
  for (uint64_t offset : {uint64_t{0}, uint64_t{12345}, uint64_t{1} << 20}) {
    std::string out(700000, '\0');
    size_t pieces = 0, total = 0;
    auto r = get.Get(server->url() + "/obj.bin", offset, out.size(), reinterpret_cast<uint8_t*>(out.data()),
                     [&](size_t k) { ++pieces, total += k; });
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_FALSE(r.fallback || r.ignored_range);
    EXPECT_EQ(out, data.substr(offset, out.size())) << "offset " << offset;
    EXPECT_EQ(total, out.size());
    EXPECT_GE(pieces, 1u);
  }
  char buf[16];
  auto missing = get.Get(server->url() + "/nope.bin", 0, sizeof buf, reinterpret_cast<uint8_t*>(buf), [](size_t) {});
  // A 404: read whole, for the caller to name; the connection stays for the next.
  EXPECT_TRUE(missing.status.ok() && !missing.fallback) << missing.status.ToString();
  EXPECT_EQ(missing.error_status, 404);
  EXPECT_NE(missing.error_body.find("404 Not Found"), std::string::npos) << missing.error_body;
  EXPECT_EQ(missing.retry_after_s, -1);
  std::string again(1000, '\0');
  auto after = get.Get(server->url() + "/obj.bin", 5, again.size(), reinterpret_cast<uint8_t*>(again.data()),
                       [](size_t) {});
  ASSERT_TRUE(after.status.ok() && !after.error_status) << after.status.ToString();
  EXPECT_EQ(again, data.substr(5, again.size()));
  auto moved = get.Get(server->url() + "/moved/obj.bin", 0, sizeof buf, reinterpret_cast<uint8_t*>(buf), [](size_t) {});
  EXPECT_TRUE(moved.fallback);  // a redirect: libcurl follows it
  server->Stop();
  auto refused = get.Get(server->url() + "/obj.bin", 0, sizeof buf, reinterpret_cast<uint8_t*>(buf), [](size_t) {});
  EXPECT_FALSE(refused.status.ok());
  EXPECT_TRUE(refused.transient) << refused.status.ToString();
  server.reset();
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(TempPath("range_nginx"));
}

TEST(HttpRangeGet, RetryAfterInSeconds) {
  EXPECT_EQ(RetryAfterSeconds("3"), 3.0);
  EXPECT_EQ(RetryAfterSeconds(" 2.5\r\n"), 2.5);  // as a header line's rest
  EXPECT_EQ(RetryAfterSeconds("86400"), 600.0);   // at most 10 minutes
  EXPECT_EQ(RetryAfterSeconds("-5"), -1.0);
  EXPECT_EQ(RetryAfterSeconds(""), -1.0);
  EXPECT_EQ(RetryAfterSeconds("soon"), -1.0);
}

TEST(HttpRangeGet, RetryAfterAsAnHttpDate) {
  const time_t now = 1445412450;  // Wed, 21 Oct 2015 07:27:30 GMT
  EXPECT_EQ(RetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT", now), 30.0);
  EXPECT_EQ(RetryAfterSeconds(" Wed, 21 Oct 2015 07:28:00 GMT\r\n", now), 30.0);  // as a header line's rest
  EXPECT_EQ(RetryAfterSeconds("Wednesday, 21-Oct-15 07:28:00 GMT", now), 30.0);    // RFC 850's form
  EXPECT_EQ(RetryAfterSeconds("Wed, 21 Oct 2015 07:00:00 GMT", now), 0.0);        // already past: at once
  EXPECT_EQ(RetryAfterSeconds("Thu, 22 Oct 2015 07:27:30 GMT", now), 600.0);      // at most 10 minutes
}

}  // namespace
}  // namespace stoker
