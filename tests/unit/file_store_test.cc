// store/file_store: a directory as a store, ranged reads with their
// CRC-32C, resumable downloads.
#include "store/file_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "stoker/store.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::ReadFile;
using testing::TempPath;
using testing::WriteFile;

std::string Bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + 7);
  return s;
}

TEST(FileStore, ReadsRangesWithTheirCrcAndDownloadsResuming) {
  const std::string dir = TempPath("store");
  std::filesystem::create_directories(dir);
  const std::string data = Bytes(3 << 20);
  WriteFile(dir + "/obj.bin", data);
  auto s = Store::Open("file://" + dir + "/");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Store& st = *s.value();
  EXPECT_EQ(st.Locate("obj.bin"), dir + "/obj.bin");
  EXPECT_EQ(st.Size("obj.bin").value(), data.size());
  std::string out(2 << 20, '\0');
  uint32_t crc = 0;
  ASSERT_TRUE(st.Read("obj.bin", 12345, out.size(), out.data(), &crc).ok());
  EXPECT_EQ(out, data.substr(12345, out.size()));
  EXPECT_EQ(crc, Crc32c(out.data(), out.size()));
  // `ready` is asked for all of it before the one read, and its error ends it.
  std::vector<uint64_t> asked;
  const Store::ReadReady ready = [&](uint64_t upto) {
    asked.push_back(upto);
    return Status::OK();
  };
  ASSERT_TRUE(st.Read("obj.bin", 1, out.size(), out.data(), nullptr, &ready).ok());
  EXPECT_EQ(asked, std::vector<uint64_t>{out.size()});
  EXPECT_EQ(out, data.substr(1, out.size()));
  const Store::ReadReady no_room = [](uint64_t) { return Status::ResourceExhausted("no room"); };
  EXPECT_EQ(st.Read("obj.bin", 0, 10, out.data(), nullptr, &no_room).code(), Status::Code::kResourceExhausted);
  // A download resumes after the bytes the file holds already.
  const std::string part = dir + "/obj.part";
  WriteFile(part, data.substr(0, 1000));
  UniqueFd fd(open(part.c_str(), O_WRONLY | O_APPEND));
  uint64_t got = 0;
  uint32_t whole = Crc32c(data.data(), 1000);
  ASSERT_TRUE(st.Download("obj.bin", fd.get(), data.size(), &got, &whole).ok());
  EXPECT_EQ(got, data.size());
  EXPECT_EQ(ReadFile(part), data);
  EXPECT_EQ(whole, Crc32c(data.data(), data.size()));
  EXPECT_EQ(st.ReadAll("obj.bin").value(), data);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
