// HostIsThisMachine and UrlHost (store/server_host.h).
#include "store/server_host.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <string>

namespace stoker {
namespace {

TEST(ServerHost, LoopbackAndLocalhostAreThisMachine) {
  for (const char* h : {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"})
    EXPECT_TRUE(HostIsThisMachine(h)) << h;
}

TEST(ServerHost, OtherAddressesAndNamesAreNot) {
  // 192.0.2.0/24 and 2001:db8::/32 are documentation ranges no interface has.
  for (const char* h : {"192.0.2.7", "2001:db8::1", "[2001:db8::1]", "s3.amazonaws.com", "bucket.s3.us-east-1.amazonaws.com",
                        "localhost.example.com", "", "128.0.0.1", "::2"})
    EXPECT_FALSE(HostIsThisMachine(h)) << h;
}

TEST(ServerHost, AnAddressOfThisMachinesOwnInterfacesIs) {
  ifaddrs* all = nullptr;
  ASSERT_EQ(getifaddrs(&all), 0);
  int seen = 0;
  for (const ifaddrs* a = all; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    ASSERT_NE(inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text), nullptr);
    EXPECT_TRUE(HostIsThisMachine(text)) << text << " (" << a->ifa_name << ")";
    ++seen;
  }
  freeifaddrs(all);
  EXPECT_GT(seen, 0) << "no IPv4 interface (not even lo)";
}

TEST(ServerHost, UrlHost) {
  EXPECT_EQ(UrlHost("http://127.0.0.1:8080/data/x"), "127.0.0.1");
  EXPECT_EQ(UrlHost("https://bucket.s3.us-west-2.amazonaws.com"), "bucket.s3.us-west-2.amazonaws.com");
  EXPECT_EQ(UrlHost("http://[::1]:9000/b"), "[::1]");
  EXPECT_EQ(UrlHost("http://user:pw@localhost/b"), "localhost");
  EXPECT_EQ(UrlHost("not a url"), "");
}

}  // namespace
}  // namespace stoker
