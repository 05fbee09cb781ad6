// store/s3_store: s3:// URLs, addressing (path-style on an endpoint,
// virtual-hosted on AWS) and the encoding SigV4 signs.  Requests against a
// real S3 server (SeaweedFS) are tested in tests/python/test_s3.py.
#include "store/s3_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "io/crc32c.h"
#include "nginx_server.h"
#include "test_files.h"
#include "watchdog.h"

namespace stoker {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* k) -> const char* {
    auto it = shared->find(k);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(S3Store, SplitUrl) {
  std::string b, p;
  ASSERT_TRUE(S3Store::SplitUrl("s3://my-bucket/a/b/", &b, &p).ok());
  EXPECT_EQ(b, "my-bucket");
  EXPECT_EQ(p, "a/b");
  ASSERT_TRUE(S3Store::SplitUrl("s3://my-bucket", &b, &p).ok());
  EXPECT_EQ(p, "");
  auto bad = S3Store::SplitUrl("s3://My_Bucket!/x", &b, &p);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("s3://bucket/prefix"), std::string::npos);
  EXPECT_FALSE(S3Store::SplitUrl("s3:///x", &b, &p).ok());
}

TEST(S3Store, EncodeAsSigV4Wants) {
  EXPECT_EQ(S3Store::Encode("a b/c+d~e_f.g-h", true), "a%20b/c%2Bd~e_f.g-h");
  EXPECT_EQ(S3Store::Encode("x/y=", false), "x%2Fy%3D");
}

TEST(S3Store, PathStyleOnAnEndpointVirtualHostedOnAws) {
  auto s = S3Store::Create("s3://data/train", {}, Env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:9000"}}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Locate("shard 1.tar"), "http://127.0.0.1:9000/data/train/shard%201.tar");
  EXPECT_EQ((*s)->url(), "s3://data/train");
  EXPECT_EQ((*s)->PreferredConnections(), 2u);  // a server of one's own
  s = S3Store::Create("s3://data/train", {}, Env({{"AWS_REGION", "eu-west-1"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Locate("a.tar"), "https://data.s3.eu-west-1.amazonaws.com/train/a.tar");
  EXPECT_EQ((*s)->PreferredConnections(), 8u);  // AWS: a connection carries a part of the network
  s = S3Store::Create("s3://my.dotted.bucket", {}, Env({}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Locate("a.tar"), "https://s3.us-east-1.amazonaws.com/my.dotted.bucket/a.tar");
}

TEST(S3Store, OpenedByUrlAndMistakesNamed) {
  StoreOptions o;
  o.s3.endpoint = "http://127.0.0.1:1";
  auto s = Store::Open("s3://bucket/prefix", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Locate("x"), "http://127.0.0.1:1/bucket/prefix/x");
  auto bad = Store::Open("gs://bucket/x", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("s3://"), std::string::npos);
  // Nothing listens on port 1: the transport error, after the attempts.
  o.attempts = 1;
  s = Store::Open("s3://bucket/prefix", o);
  auto size = (*s)->Size("x");
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), Status::Code::kIOError);
}

// Over a plain http:// endpoint a signed read's body is received in place
// (libcurl signs, RequestCapture takes the request, HttpRangeGet receives).
// nginx does not check signatures; SeaweedFS does, in test_s3.py.
TEST(S3Store, SignedReadsReceivedInPlaceAndTheirErrorsNamed) {
  if (!testing::NginxServer::Installed()) GTEST_SKIP() << "nginx is not installed (scripts/run.sh installs it)";
  testing::Watchdog dog(std::chrono::seconds(60), "S3Store.InPlace");
  const std::string root = testing::TempPath("s3_nginx_root");
  std::filesystem::create_directories(root + "/bkt/pre");
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4093);
  testing::WriteFile(root + "/bkt/pre/obj.bin", data);
  auto server = std::make_unique<testing::NginxServer>(testing::TempPath("s3_nginx"), root);
  ASSERT_TRUE(server->Start());
  for (bool in_place : {true, false}) {
    for (bool keyed : {true, false}) {  // signed, and a public bucket's unsigned requests
      StoreOptions o;
      o.receive_in_place = in_place;
      o.attempts = 2;
      o.s3.endpoint = server->url();
      o.s3.region = "us-east-1";
      o.s3.access_key_id = keyed ? "AKEXAMPLE" : "";
      o.s3.secret_access_key = keyed ? "s3cret" : "";
      auto s = S3Store::Create("s3://bkt/pre", o, Env({}));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      const uint64_t offset = 12345, n = 2 << 20;
      std::string out(n, '\0');
      uint32_t crc = 0;
      Status st = (*s)->Read("obj.bin", offset, n, out.data(), &crc);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_TRUE(out == data.substr(offset, n)) << "in_place " << in_place << " keyed " << keyed;
      EXPECT_EQ(crc, Crc32c(data.data() + offset, n));
      EXPECT_EQ((*s)->requests(), 1u) << "an answer left to libcurl asks twice";
      EXPECT_EQ((*s)->bytes_received(), n);
      EXPECT_EQ((*s)->bytes_in_place(), in_place ? n : 0u);
      // No such key: named from the answer either path read, in one request.
      st = (*s)->Read("missing.bin", 0, 10, out.data());
      EXPECT_EQ(st.code(), Status::Code::kNotFound) << st.ToString();
      EXPECT_NE(st.message().find("s3://bkt/pre/missing.bin: NoSuchKey or NoSuchBucket (HTTP 404)"),
                std::string::npos) << st.ToString();
      EXPECT_EQ((*s)->requests(), 2u);
      EXPECT_EQ((*s)->retries(), 0u) << "a 404 is not retried";
      // And the connection serves the next read.
      st = (*s)->Read("obj.bin", 0, 1000, out.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out.substr(0, 1000), data.substr(0, 1000));
      EXPECT_EQ((*s)->bytes_in_place(), in_place ? n + 1000 : 0u);
    }
  }
  server.reset();
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(testing::TempPath("s3_nginx"));
}

}  // namespace
}  // namespace stoker
