// io/tar_shard_dataset: samples grouped by key, fields declared or inferred, unsafe members, truncation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/tar_shard_dataset.h"
#include "tar_bytes.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::RawTarHeader;
using testing::TarOf;

using testing::TempPath;
using testing::WriteFile;

TEST(TarShardDataset, GroupsSamplesByKeyAndReadsFields) {
  const std::string path = TempPath("s.tar");
  int32_t raw[2] = {7, 8};
  WriteFile(path, TarOf({{"a/s0.cls", "3"}, {"a/s0.bin", std::string(reinterpret_cast<char*>(raw), 8)},
                         {"a/s0.txt", "hello"}, {"a/s1.cls", " 4\n"}, {"a/s1.bin", std::string(8, '\0')},
                         {"a/s1.txt", ""}}));
  std::vector<TarFieldDecl> decls = {{"cls", TarFieldKind::kInt, ElementType::kInt64, {}},
                                     {"bin", TarFieldKind::kRaw, ElementType::kInt32, {2}},
                                     {"txt", TarFieldKind::kBytes, ElementType::kUInt8, {}}};
  auto ds = TarShardDataset::Open({path}, decls);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ(ds.value()->size(), 2u);
  EXPECT_EQ(ds.value()->key(1), "a/s1");
  EXPECT_TRUE(ds.value()->fields()[2].variable);
  uint64_t sizes[3];
  ASSERT_TRUE(ds.value()->SampleBytes(0, sizes).ok());
  EXPECT_EQ(sizes[2], 5u);
  int64_t cls;
  int32_t bin[2];
  char txt[5];
  uint8_t* dst[3] = {reinterpret_cast<uint8_t*>(&cls), reinterpret_cast<uint8_t*>(bin), reinterpret_cast<uint8_t*>(txt)};
  ASSERT_TRUE(ds.value()->Read(0, dst).ok());
  EXPECT_EQ(cls, 3);
  EXPECT_EQ(bin[1], 8);
  EXPECT_EQ(std::string(txt, 5), "hello");
  ASSERT_TRUE(ds.value()->Read(1, dst).ok());
  EXPECT_EQ(cls, 4);
  // Inferred fields: cls -> int, the rest bytes.
  auto inferred = TarShardDataset::Open({path}, {});
  ASSERT_TRUE(inferred.ok());
  ASSERT_EQ(inferred.value()->decls().size(), 3u);
  EXPECT_EQ(inferred.value()->decls()[0].kind, TarFieldKind::kInt);
  EXPECT_EQ(inferred.value()->decls()[1].kind, TarFieldKind::kBytes);
  // A member of the wrong size for its declared shape names shard, sample, member.
  decls[1].shape = {3};
  auto wrong = TarShardDataset::Open({path}, decls);
  ASSERT_TRUE(wrong.ok());
  Status st = wrong.value()->Read(0, dst);
  ASSERT_TRUE(st.IsDataLoss());
  EXPECT_NE(st.message().find("tar shard " + path + ", sample 'a/s0' (index 0): member 'a/s0.bin' has 8 bytes; "
                              "declared int32 (3,) needs 12"), std::string::npos) << st.message();
  std::remove(path.c_str());
}

TEST(TarShardDataset, UnsafeMembersLinksAndTruncation) {
  const std::string path = TempPath("bad.tar");
  std::string good = TarOf({{"k.cls", "1"}});
  good.resize(good.size() - 1024);  // drop the end blocks
  std::string evil = RawTarHeader("../evil.cls", '0', 1) + std::string("2") + std::string(511, '\0');
  std::string abs = RawTarHeader("/etc/x.cls", '0', 1) + std::string("3") + std::string(511, '\0');
  std::string link = RawTarHeader("l.cls", '2', 0, "/etc/passwd");
  WriteFile(path, good + evil + abs + link + std::string(1024, '\0'));
  FileReader f = std::move(FileReader::Open(path)).value();
  auto strict = ListTar(f, false);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("tar shard " + path + ", header at byte offset 1024: member "
                                           "'../evil.cls' has a '..' component"), std::string::npos)
      << strict.status().message();
  auto lenient = ListTar(f, true);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient.value().members.size(), 1u);
  ASSERT_EQ(lenient.value().bad.size(), 3u);
  EXPECT_NE(lenient.value().bad[1].find("an absolute path"), std::string::npos);
  EXPECT_NE(lenient.value().bad[2].find("a link (to '/etc/passwd')"), std::string::npos);
  TarShardOptions o;
  o.on_error = OnError::kSkip;
  auto ds = TarShardDataset::Open({path}, {}, o);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds.value()->size(), 1u);
  EXPECT_EQ(ds.value()->skipped(), 3u);
  // Truncated inside a member's data.
  std::string t = TarOf({{"k.bin", std::string(3000, 'x')}});
  WriteFile(path, t.substr(0, 2000));
  FileReader g = std::move(FileReader::Open(path)).value();
  auto cut = ListTar(g, false);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("claims 3000 bytes"), std::string::npos) << cut.status().message();
  // Not a tar file.
  WriteFile(path, std::string(1024, 'z'));
  FileReader h = std::move(FileReader::Open(path)).value();
  auto junk = ListTar(h, false);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("checksum"), std::string::npos);
  // The writer refuses unsafe paths.
  std::string out;
  EXPECT_FALSE(AppendTarMember(&out, "../x", "", 0).ok());
  EXPECT_FALSE(AppendTarMember(&out, "/x", "", 0).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace stoker
