// io/file_reader: exact reads in every I/O mode, errors naming the file and
// offset, reads over memory.
#include "io/file_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
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

TEST(FileReader, PiecesReadTogetherAreThePiecesReadAlone) {
  // Runs of adjacent pieces (one read, into place or through the buffer),
  // lone ones, a repeat, runs longer than kRunBytes, in every mode.
  const uint64_t n = 100;
  const std::string data = Pattern(n * 20000);
  const std::string path = TempFile("pieces.bin", data);
  std::vector<uint64_t> records = {0, 1, 2, 3, 7, 7, 8, 100, 101, 5000, 19999};
  for (uint64_t r = 6000; r < 6000 + 3 * FileReader::kRunBytes / n; ++r) records.push_back(r);  // a long run
  std::vector<uint64_t> offsets;
  for (uint64_t r : records) offsets.push_back(r * n);
  for (const char* mode : {"pread", "mmap", "direct"}) {
    auto f = FileReader::Open(path, {ParseIoMode(mode).value(), false});
    if (!f.ok() && std::string(mode) == "direct") continue;  // (tmpfs)
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    for (bool adjacent : {true, false}) {  // destinations side by side (in place) or apart (the buffer)
      std::string out(records.size() * n * 2, '\0');
      std::vector<std::pair<uint64_t, uint8_t*>> pieces;
      for (size_t k = 0; k < records.size(); ++k)
        pieces.emplace_back(offsets[k],
                            reinterpret_cast<uint8_t*>(out.data()) + (adjacent ? k : records.size() - 1 - k) * n);
      ASSERT_TRUE(f.value().ReadOutPieces(pieces.data(), pieces.size(), n).ok()) << mode;
      for (size_t k = 0; k < records.size(); ++k)
        ASSERT_EQ(std::string(reinterpret_cast<char*>(pieces[k].second), n), data.substr(offsets[k], n))
            << mode << " piece " << k << (adjacent ? " in place" : " apart");
    }
    // A piece past the end: the error names the file and the offset.
    const uint64_t past = data.size() - n / 2;
    std::string out(2 * n, '\0');
    const std::pair<uint64_t, uint8_t*> pieces[2] = {{n, reinterpret_cast<uint8_t*>(out.data())},
                                                     {past, reinterpret_cast<uint8_t*>(out.data()) + n}};
    Status st = f.value().ReadOutPieces(pieces, 2, n);
    EXPECT_FALSE(st.ok()) << mode;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(std::to_string(past)), std::string::npos) << st.ToString();
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
