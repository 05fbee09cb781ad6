// io/file_reader: exact reads in every I/O mode, errors naming the file and
// offset, reads over memory.
#include "io/file_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test_files.h"

namespace stoker {
namespace {

using testing::TempFile;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + i / 4096);
  return s;
}

TEST(FileReader, EveryModeReadsTheSameBytes) {
  const std::string data = Pattern((1 << 20) + 123);  // not a multiple of a block: O_DIRECT's tail
  const std::string path = TempFile("reader.bin", data);
  for (const char* mode : {"pread", "mmap", "direct"}) {
    auto f = FileReader::Open(path, {ParseIoMode(mode).value(), false});
    if (!f.ok() && std::string(mode) == "direct" && f.status().message().find("O_DIRECT") != std::string::npos)
      continue;  // a temp directory on tmpfs: the clear error is the behaviour there
    ASSERT_TRUE(f.ok()) << mode << ": " << f.status().ToString();
    EXPECT_EQ(f.value().size(), data.size());
    for (auto [off, n] : std::vector<std::pair<uint64_t, uint64_t>>{{0, 10}, {4095, 2}, {1000, 300000}, {data.size() - 5, 5}}) {
      std::string out(n, '\0');
      ASSERT_TRUE(f.value().ReadAt(off, out.data(), n).ok()) << mode << " at " << off;
      EXPECT_EQ(out, data.substr(off, n)) << mode << " at " << off;
      ASSERT_TRUE(f.value().ReadOut(off, out.data(), n).ok());
      EXPECT_EQ(out, data.substr(off, n)) << mode << " (into a batch) at " << off;
    }
    EXPECT_EQ(f.value().Mapped(0, 4) != nullptr, std::string(mode) == "mmap");
  }
  std::remove(path.c_str());
}

TEST(FileReader, ReadsPastTheEndAndBadOptionsSayWhat) {
  const std::string path = TempFile("short.bin", "0123456789");
  FileReader f = FileReader::Open(path).value();
  char buf[8];
  Status st = f.ReadAt(5, buf, 8);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("5"), std::string::npos) << st.ToString();
  auto missing = FileReader::Open(path + ".nope");
  EXPECT_EQ(missing.status().code(), Status::Code::kIOError);
  EXPECT_NE(missing.status().message().find(path + ".nope"), std::string::npos);
  auto bad = ParseIoMode("async");
  EXPECT_NE(bad.status().message().find("'pread', 'mmap', 'direct'"), std::string::npos);
  std::remove(path.c_str());
}

TEST(FileReader, OverMemoryReadsTheCallersBytes) {
  const std::string data = Pattern(5000);
  FileReader f = FileReader::OverMemory("buffer", reinterpret_cast<const uint8_t*>(data.data()), data.size());
  EXPECT_EQ(f.size(), 5000u);
  EXPECT_EQ(f.Mapped(10, 5), reinterpret_cast<const uint8_t*>(data.data()) + 10);
  std::string out(100, '\0');
  ASSERT_TRUE(f.ReadAt(4900, out.data(), 100).ok());
  EXPECT_EQ(out, data.substr(4900));
  Status st = f.ReadAt(4901, out.data(), 100);
  EXPECT_NE(st.message().find("buffer"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace stoker
