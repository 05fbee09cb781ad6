// cache/s3_store: s3:// URLs, addressing (path-style on an endpoint,
// virtual-hosted on AWS) and the encoding SigV4 signs.  Requests against a
// real S3 server (SeaweedFS) are tested in tests/python/test_s3.py.
#include "cache/s3_store.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

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

}  // namespace
}  // namespace stoker
