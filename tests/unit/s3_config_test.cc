// store/s3_config: the explicit options, then the environment, then the
// shared credentials and config files, as the AWS SDKs look.
#include "store/s3_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "test_files.h"

namespace stoker {
namespace {

using testing::TempPath;
using testing::WriteFile;

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* k) -> const char* {
      auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

class S3ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = TempPath("s3_home");
    std::filesystem::create_directories(home_ + "/.aws");
    env_.vars["HOME"] = home_;
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  std::string home_;
  FakeEnv env_;
};

TEST(ParseIni, SectionsKeysCommentsAndBlanks) {
  IniFile f = ParseIni("# top\n[default]\nregion = eu-west-1\n\n; c\n[profile x]\n  key=v = w \nnot a pair\n");
  EXPECT_EQ(f["default"]["region"], "eu-west-1");
  EXPECT_EQ(f["profile x"]["key"], "v = w");
  EXPECT_EQ(f.size(), 2u);
}

TEST_F(S3ConfigTest, NothingAnywhereMeansUnsignedInUsEast1OnAws) {
  auto c = ResolveS3Config({}, env_.lookup());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_TRUE(c->endpoint.empty());
  EXPECT_TRUE(c->access_key_id.empty());
  EXPECT_EQ(c->profile, "default");
}

TEST_F(S3ConfigTest, TheEnvironmentsKeysRegionAndEndpoint) {
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "SKENV";
  env_.vars["AWS_SESSION_TOKEN"] = "TOK";
  env_.vars["AWS_DEFAULT_REGION"] = "eu-central-1";
  env_.vars["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000/";
  auto c = ResolveS3Config({}, env_.lookup()).value();
  EXPECT_EQ(c.access_key_id, "AKENV");
  EXPECT_EQ(c.secret_access_key, "SKENV");
  EXPECT_EQ(c.session_token, "TOK");
  EXPECT_EQ(c.region, "eu-central-1");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9000");  // the trailing slash dropped
  EXPECT_EQ(c.credentials_from, "AWS_ACCESS_KEY_ID");
  // AWS_REGION over AWS_DEFAULT_REGION; AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL.
  env_.vars["AWS_REGION"] = "ap-south-1";
  env_.vars["AWS_ENDPOINT_URL_S3"] = "https://s3.example.com";
  c = ResolveS3Config({}, env_.lookup()).value();
  EXPECT_EQ(c.region, "ap-south-1");
  EXPECT_EQ(c.endpoint, "https://s3.example.com");
}

TEST_F(S3ConfigTest, TheProfilesFilesAndAwsProfile) {
  WriteFile(home_ + "/.aws/credentials",
            "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = SKDEF\n"
            "[train]\naws_access_key_id = AKTRAIN\naws_secret_access_key = SKTRAIN\n");
  WriteFile(home_ + "/.aws/config",
            "[default]\nregion = us-west-2\n[profile train]\nregion = eu-north-1\nendpoint_url = http://minio:9000\n");
  auto c = ResolveS3Config({}, env_.lookup()).value();
  EXPECT_EQ(c.access_key_id, "AKDEF");
  EXPECT_EQ(c.region, "us-west-2");
  EXPECT_TRUE(c.endpoint.empty());
  EXPECT_NE(c.credentials_from.find("profile 'default'"), std::string::npos);
  env_.vars["AWS_PROFILE"] = "train";
  c = ResolveS3Config({}, env_.lookup()).value();
  EXPECT_EQ(c.access_key_id, "AKTRAIN");
  EXPECT_EQ(c.secret_access_key, "SKTRAIN");
  EXPECT_EQ(c.region, "eu-north-1");
  EXPECT_EQ(c.endpoint, "http://minio:9000");
  // The environment's keys win over AWS_PROFILE's, as in the AWS CLI...
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "SKENV";
  EXPECT_EQ(ResolveS3Config({}, env_.lookup())->access_key_id, "AKENV");
  // ...and a profile named in the options wins over them.
  S3Options named;
  named.profile = "train";
  EXPECT_EQ(ResolveS3Config(named, env_.lookup())->access_key_id, "AKTRAIN");
}

TEST_F(S3ConfigTest, FilesNamedByTheEnvironment) {
  WriteFile(home_ + "/creds", "[default]\naws_access_key_id = AKF\naws_secret_access_key = SKF\n");
  WriteFile(home_ + "/conf", "[default]\nregion = sa-east-1\n");
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] = home_ + "/creds";
  env_.vars["AWS_CONFIG_FILE"] = home_ + "/conf";
  auto c = ResolveS3Config({}, env_.lookup()).value();
  EXPECT_EQ(c.access_key_id, "AKF");
  EXPECT_EQ(c.region, "sa-east-1");
}

TEST_F(S3ConfigTest, ExplicitOptionsOverrideEverything) {
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "SKENV";
  env_.vars["AWS_REGION"] = "eu-west-1";
  env_.vars["AWS_ENDPOINT_URL"] = "http://env:1";
  S3Options x;
  x.access_key_id = "AKX";
  x.secret_access_key = "SKX";
  x.region = "us-east-2";
  x.endpoint = "http://x:2";
  auto c = ResolveS3Config(x, env_.lookup()).value();
  EXPECT_EQ(c.access_key_id, "AKX");
  EXPECT_EQ(c.secret_access_key, "SKX");
  EXPECT_TRUE(c.session_token.empty());  // not the environment's
  EXPECT_EQ(c.region, "us-east-2");
  EXPECT_EQ(c.endpoint, "http://x:2");
}

TEST_F(S3ConfigTest, MistakesAreNamed) {
  S3Options x;
  x.profile = "nope";
  auto c = ResolveS3Config(x, env_.lookup());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("profile 'nope'"), std::string::npos) << c.status().message();
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKONLY";
  c = ResolveS3Config({}, env_.lookup());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("without its secret"), std::string::npos) << c.status().message();
  env_.vars.erase("AWS_ACCESS_KEY_ID");
  x = {};
  x.endpoint = "minio:9000";
  c = ResolveS3Config(x, env_.lookup());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("http://"), std::string::npos);
}

}  // namespace
}  // namespace stoker
