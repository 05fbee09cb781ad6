// core/atomic_file: a file appears whole under its name or not at all.
#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_files.h"

namespace stoker {
namespace {

using testing::ReadFile;
using testing::TempPath;

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

TEST(AtomicFile, NothingUnderTheNameUntilCommit) {
  const std::string dir = TempPath("atomic") + "/sub/dir";  // directories made as needed
  const std::string path = dir + "/out.bin";
  auto f = AtomicFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f.value().Append("hello ").ok());
  ASSERT_TRUE(f.value().Append(std::string(100000, 'x')).ok());
  EXPECT_FALSE(Exists(path));
  EXPECT_TRUE(Exists(f.value().temp_path()));
  ASSERT_TRUE(f.value().Commit().ok());
  EXPECT_FALSE(Exists(f.value().temp_path()));
  EXPECT_EQ(ReadFile(path), "hello " + std::string(100000, 'x'));
  Status again = f.value().Commit();
  EXPECT_EQ(again.code(), Status::Code::kInvalidArgument) << again.ToString();
  EXPECT_NE(again.message().find(path), std::string::npos);
  std::filesystem::remove_all(TempPath("atomic"));
}

TEST(AtomicFile, UncommittedLeavesNothingAndAnOldFileStands) {
  const std::string path = TempPath("atomic_old");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  std::string tmp;
  {
    auto f = AtomicFile::Create(path);
    ASSERT_TRUE(f.ok());
    tmp = f.value().temp_path();
    ASSERT_TRUE(f.value().Append("new, half written").ok());
    AtomicFile moved(std::move(f).value());  // the moved-from one owns nothing
  }
  EXPECT_FALSE(Exists(tmp));
  EXPECT_EQ(ReadFile(path), "old");
  ASSERT_TRUE(WriteFileAtomically(path, "new", /*sync=*/false).ok());
  EXPECT_EQ(ReadFile(path), "new");
  unlink(path.c_str());
}

TEST(AtomicFile, CreateInAPlaceThatCannotHoldItNamesThePath) {
  auto f = AtomicFile::Create("/proc/stoker-no-such-dir/out.bin");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kIOError);
  EXPECT_NE(f.status().message().find("/proc/stoker-no-such-dir/out.bin.tmp."), std::string::npos) << f.status().ToString();
}

}  // namespace
}  // namespace stoker
