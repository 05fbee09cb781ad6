// store/s3_xml: S3's error answers and ListObjectsV2 pages.
#include "store/s3_xml.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(S3Xml, AnErrorsCodeAndMessage) {
  S3Error e = ParseS3Error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key &quot;a&amp;b&quot; does not "
      "exist.</Message><Key>a&amp;b</Key></Error>");
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "The key \"a&b\" does not exist.");
  EXPECT_TRUE(ParseS3Error("").code.empty());
  EXPECT_TRUE(ParseS3Error("<html>Bad gateway</html>").code.empty());
}

TEST(S3Xml, Unescape) {
  EXPECT_EQ(XmlUnescape("&lt;&gt;&apos;&#34;&#x41;&#233;&unknown; & x"), "<>'\"A\xC3\xA9&unknown; & x");
}

TEST(S3Xml, AListPageWithItsToken) {
  auto p = ParseS3ListPage(
      "<ListBucketResult xmlns=\"x\"><Name>b</Name><IsTruncated>true</IsTruncated>"
      "<Contents><Key>d/a.tar</Key><Size>10</Size><ETag>&#34;e&#34;</ETag></Contents>"
      "<Contents><Key>d/b&amp;c.tar</Key><Size>20</Size></Contents>"
      "<CommonPrefixes><Prefix>d/sub/</Prefix></CommonPrefixes>"
      "<NextContinuationToken>tok/+=</NextContinuationToken></ListBucketResult>");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].name, "d/a.tar");
  EXPECT_EQ(p->objects[0].size, 10u);
  EXPECT_EQ(p->objects[1].name, "d/b&c.tar");
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "tok/+=");
}

TEST(S3Xml, ALastPageAndBrokenAnswers) {
  auto p = ParseS3ListPage("<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->objects.empty());
  EXPECT_FALSE(p->truncated);
  EXPECT_EQ(ParseS3ListPage("<Error><Code>AccessDenied</Code></Error>").status().code(), Status::Code::kDataLoss);
  EXPECT_FALSE(ParseS3ListPage("<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>").ok());
  EXPECT_FALSE(ParseS3ListPage("<ListBucketResult><Contents><Key>a</Key><Size>1x</Size></Contents>"
                               "</ListBucketResult>").ok());
  EXPECT_FALSE(ParseS3ListPage("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>").ok());
}

}  // namespace
}  // namespace stoker
