// cache/http_store over a real nginx: sizes, ranged reads with their
// CRC-32C, downloads, redirects, and errors that name the URL.
#include "cache/http_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "nginx_server.h"
#include "test_files.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::NginxServer;
using testing::ReadFile;
using testing::TempPath;
using testing::WriteFile;

class HttpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NginxServer::Installed()) GTEST_SKIP() << "nginx is not installed (scripts/run.sh installs it)";
    root_ = TempPath("http_root");
    std::filesystem::create_directories(root_);
    data_.resize(3 << 20);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<char>(i * 31 + i / 1000);
    WriteFile(root_ + "/obj.bin", data_);
    WriteFile(root_ + "/index.txt", "obj.bin 3145728\n");
    server_ = std::make_unique<NginxServer>(TempPath("http_nginx"), root_);
    ASSERT_TRUE(server_->Start()) << "nginx did not start";
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
    std::filesystem::remove_all(TempPath("http_nginx"));
  }
  std::unique_ptr<Store> Open(const std::string& path = "", StoreOptions o = {}) {
    auto s = Store::Open(server_->url() + path, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::string root_, data_;
  std::unique_ptr<NginxServer> server_;
};

TEST_F(HttpStoreTest, SizesRangesAndWholeObjects) {
  testing::Watchdog dog(std::chrono::seconds(60), "HttpStore.Ranges");
  for (bool in_place : {true, false}) {  // our receive-in-place path and libcurl's
    StoreOptions o;
    o.receive_in_place = in_place;
    auto s = Open("", o);
    EXPECT_EQ(s->Size("obj.bin").value(), data_.size());
    std::string out(1 << 20, '\0');
    uint32_t crc = 0;
    ASSERT_TRUE(s->Read("obj.bin", 777, out.size(), out.data(), &crc).ok());
    EXPECT_EQ(out, data_.substr(777, out.size())) << "in place: " << in_place;
    EXPECT_EQ(crc, Crc32c(out.data(), out.size()));
    EXPECT_EQ(s->ReadAll("index.txt").value(), "obj.bin 3145728\n");
    EXPECT_GE(s->requests(), 2u);
  }
}

TEST_F(HttpStoreTest, DownloadsResumeAndRedirectsAreFollowed) {
  testing::Watchdog dog(std::chrono::seconds(60), "HttpStore.Download");
  auto s = Open("/moved");
  const std::string part = TempPath("http_part");
  WriteFile(part, data_.substr(0, 5000));
  UniqueFd fd(open(part.c_str(), O_WRONLY | O_APPEND));
  uint64_t got = 0;
  uint32_t crc = Crc32c(data_.data(), 5000);
  ASSERT_TRUE(s->Download("obj.bin", fd.get(), data_.size(), &got, &crc).ok());
  EXPECT_EQ(got, data_.size());
  EXPECT_EQ(ReadFile(part), data_);
  EXPECT_EQ(crc, Crc32c(data_.data(), data_.size()));
  EXPECT_LT(s->bytes_received(), data_.size());  // only what the part lacked
  std::remove(part.c_str());
}

TEST_F(HttpStoreTest, MissingObjectsAndAServerGoneAreClearErrors) {
  testing::Watchdog dog(std::chrono::seconds(60), "HttpStore.Errors");
  StoreOptions o;
  o.attempts = 3;
  o.backoff_s = 0.01;
  auto s = Open("", o);
  auto missing = s->Size("nope.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(server_->url() + "/nope.bin"), std::string::npos) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("404"), std::string::npos);
  EXPECT_EQ(s->retries(), 0u);  // a 404 is not retried
  server_->Stop();
  char buf[10];
  Status gone = s->Read("obj.bin", 0, 10, buf);
  EXPECT_EQ(gone.code(), Status::Code::kIOError);
  EXPECT_NE(gone.message().find("failed after 3 attempts"), std::string::npos) << gone.ToString();
  EXPECT_NE(gone.message().find(server_->url() + "/obj.bin"), std::string::npos) << gone.ToString();
  EXPECT_EQ(s->retries(), 2u);
}

}  // namespace
}  // namespace stoker
