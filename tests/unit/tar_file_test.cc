// io/tar_file: listing an archive, writing members, WebDataset's keys.
#include "io/tar_file.h"

#include <gtest/gtest.h>

#include <string>

#include "io/file_reader.h"
#include "tar_bytes.h"

namespace stoker {
namespace {

using testing::RawTarHeader;
using testing::TarOf;

TEST(TarFile, ListsRegularFilesWithTheirOffsets) {
  const std::string t = TarOf({{"a/x.cls", "7"}, {"a/x.npy", std::string(700, 'n')}, {"b.txt", ""}});
  ASSERT_EQ(t.size() % 512, 0u);
  FileReader f = FileReader::OverMemory("mem.tar", reinterpret_cast<const uint8_t*>(t.data()), t.size());
  auto l = ListTar(f, false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l.value().members.size(), 3u);
  const TarMember& npy = l.value().members[1];
  EXPECT_EQ(npy.path, "a/x.npy");
  EXPECT_EQ(npy.size, 700u);
  EXPECT_EQ(npy.data_offset, npy.header_offset + 512);
  EXPECT_EQ(t.substr(npy.data_offset, 700), std::string(700, 'n'));
  EXPECT_EQ(l.value().members[2].size, 0u);
  EXPECT_TRUE(l.value().bad.empty());
}

TEST(TarFile, UnsafeMembersAreDataLossOrSkipped) {
  std::string t = RawTarHeader("../escape", '0', 0) + TarOf({{"ok.cls", "1"}});
  FileReader f = FileReader::OverMemory("mem.tar", reinterpret_cast<const uint8_t*>(t.data()), t.size());
  auto strict = ListTar(f, false);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(strict.status().message().find("mem.tar"), std::string::npos) << strict.status().ToString();
  EXPECT_NE(strict.status().message().find("../escape"), std::string::npos) << strict.status().ToString();
  auto lenient = ListTar(f, true);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  ASSERT_EQ(lenient.value().members.size(), 1u);
  EXPECT_EQ(lenient.value().members[0].path, "ok.cls");
  EXPECT_EQ(lenient.value().bad.size(), 1u);
}

TEST(TarFile, WritingRefusesPathsUstarCannotHoldOrThatAreUnsafe) {
  std::string out;
  EXPECT_FALSE(AppendTarMember(&out, std::string(300, 'p'), "", 0).ok());
  EXPECT_FALSE(AppendTarMember(&out, "/abs/path", "", 0).ok());
  EXPECT_FALSE(AppendTarMember(&out, "a/../../b", "", 0).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(AppendTarMember(&out, std::string(120, 'd') + "/f.bin", "xy", 2).ok());  // prefix + name
  EXPECT_EQ(out.size(), 1024u);  // header, data padded to a block
}

TEST(TarFile, SplitKeyIsWebDatasets) {
  std::string k, e;
  SplitTarKey("dir.v1/abc.seg.png", &k, &e);
  EXPECT_EQ(k, "dir.v1/abc");
  EXPECT_EQ(e, "seg.png");
  SplitTarKey("noext", &k, &e);
  EXPECT_EQ(k, "noext");
  EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace stoker
