// store/http_store over a real nginx: sizes, ranged reads with their
// CRC-32C, downloads, redirects, and errors that name the URL.
#include "store/http_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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

// Store::Read's `ready`: asked before every write, for offsets that only
// grow; nothing lands past the last one (here the memory past it is not
// even mapped writable: a write there is a crash), and an error from it
// ends the read with that error, not retried.
TEST_F(HttpStoreTest, ReadyIsAskedAheadOfEveryWriteAndItsErrorEndsTheRead) {
  testing::Watchdog dog(std::chrono::seconds(60), "HttpStore.Ready");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uint64_t n = data_.size() - 777;
  for (bool in_place : {true, false}) {  // our receive-in-place path and libcurl's
    StoreOptions o;
    o.receive_in_place = in_place;
    o.attempts = 3;
    o.backoff_s = 0.01;
    auto s = Open("", o);
    const size_t len = (n + page - 1) / page * page;
    void* m = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    auto* dst = static_cast<uint8_t*>(m);
    std::vector<uint64_t> asked;
    uint64_t writable = 0;
    const Store::ReadReady ready = [&](uint64_t upto) {
      EXPECT_TRUE(asked.empty() || upto > asked.back()) << upto;
      EXPECT_LE(upto, n);
      asked.push_back(upto);
      const uint64_t to = std::min<uint64_t>(len, (upto + page - 1) / page * page);
      if (to > writable) {
        EXPECT_EQ(mprotect(dst + writable, to - writable, PROT_READ | PROT_WRITE), 0);
        writable = to;
      }
      return Status::OK();
    };
    uint32_t crc = 0;
    ASSERT_TRUE(s->Read("obj.bin", 777, n, dst, &crc, &ready).ok()) << "in place: " << in_place;
    EXPECT_EQ(std::string(reinterpret_cast<char*>(dst), n), data_.substr(777)) << "in place: " << in_place;
    EXPECT_EQ(crc, Crc32c(dst, n));
    ASSERT_FALSE(asked.empty());
    EXPECT_EQ(asked.back(), n);
    EXPECT_GT(asked.size(), 2u) << "asked piece by piece, not once for all of it";
    // An error from `ready` past the first MiB: that error, at once.
    const uint64_t requests = s->requests(), retries = s->retries();
    const Store::ReadReady no_room = [&](uint64_t upto) {
      return upto > (1u << 20) ? Status::ResourceExhausted("no room past a MiB") : Status::OK();
    };
    Status st = s->Read("obj.bin", 777, n, dst, nullptr, &no_room);
    EXPECT_EQ(st.code(), Status::Code::kResourceExhausted) << st.ToString();
    EXPECT_NE(st.message().find("no room past a MiB"), std::string::npos) << st.ToString();
    EXPECT_EQ(s->requests(), requests + 1) << "in place: " << in_place;
    EXPECT_EQ(s->retries(), retries);
    // The connection is fit for the next read.
    std::string out(1000, '\0');
    ASSERT_TRUE(s->Read("obj.bin", 5, out.size(), out.data()).ok());
    EXPECT_EQ(out, data_.substr(5, out.size()));
    munmap(m, len);
  }
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
