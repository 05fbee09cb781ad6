// store/file_sink: buffered appends land at the right offsets, with the
// CRC-32C of everything written.
#include "store/file_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::ReadFile;
using testing::TempPath;

TEST(FileSink, AppendsThroughItsBufferFromTheGivenOffset) {
  const std::string path = TempPath("sink.bin");
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(write(fd.get(), "HEAD", 4), 4);
  uint32_t crc = Crc32c("HEAD", 4);
  FileSink sink(fd.get(), 4, path, &crc, /*buffer_bytes=*/1000);
  std::string expect = "HEAD";
  for (int i = 0; i < 50; ++i) {
    const std::string piece(static_cast<size_t>(i * 37 % 700), static_cast<char>('a' + i % 26));
    ASSERT_TRUE(sink.Append(piece.data(), piece.size()).ok());
    expect += piece;
    EXPECT_EQ(sink.at(), expect.size());
  }
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(ReadFile(path), expect);
  EXPECT_EQ(crc, Crc32c(expect.data(), expect.size()));
  std::remove(path.c_str());
}

TEST(FileSink, AWriteErrorNamesTheTarget) {
  UniqueFd ro(open("/dev/null", O_RDONLY));
  FileSink sink(ro.get(), 0, "the target", nullptr, 16);
  Status st = sink.Append(std::string(64, 'x').data(), 64);
  if (st.ok()) st = sink.Flush();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the target"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace stoker
