// store/store: which URLs open which store, and why one does not open.
#include "stoker/store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_files.h"

namespace stoker {
namespace {

using testing::TempPath;
using testing::WriteFile;

TEST(Store, UrlsOpenTheirStoreOrSayWhyNot) {
  const std::string dir = TempPath("store_urls");
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(Store::Open(dir).ok());  // a plain path
  auto unknown = Store::Open("ftp://host/x");
  EXPECT_EQ(unknown.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("ftp://host/x"), std::string::npos) << unknown.status().ToString();
  auto missing = Store::Open(dir + "/nope");
  EXPECT_EQ(missing.status().code(), Status::Code::kIOError);
  WriteFile(dir + "/file", "x");
  auto not_dir = Store::Open("file://" + dir + "/file");
  EXPECT_NE(not_dir.status().message().find("is not a directory"), std::string::npos);
  StoreOptions o;
  o.attempts = 0;
  EXPECT_NE(Store::Open(dir, o).status().message().find("attempts"), std::string::npos);
  auto s = Store::Open(dir).value();
  auto size = s->Size("absent.bin");
  EXPECT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find(dir + "/absent.bin"), std::string::npos) << size.status().ToString();
  std::filesystem::remove_all(dir);
}

// A scheme of the program's own: Store::Open hands its URLs to the opener
// registered for it; an unknown scheme's error names those it knows.
TEST(Store, RegisteredSchemesOpenTheirUrls) {
  const std::string dir = TempPath("store_scheme");
  std::filesystem::create_directories(dir);
  static std::string* root = new std::string;
  *root = dir;
  auto unknown = Store::Open("mine://bucket/x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no store for mine://"), std::string::npos) << unknown.status().ToString();
  EXPECT_NE(unknown.status().message().find("http://"), std::string::npos)  // (registered by register_stores.cc)
      << unknown.status().ToString();
  Store::RegisterScheme("mine", [](const std::string& url, const StoreOptions& o) {
    return Store::Open(*root + "/" + url.substr(std::string("mine://").size()), o);
  });
  std::filesystem::create_directories(dir + "/bucket");
  WriteFile(dir + "/bucket/a.bin", "abc");
  auto s = Store::Open("mine://bucket");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s.value()->Size("a.bin").value(), 3u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
