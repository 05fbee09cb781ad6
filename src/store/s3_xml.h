// The two XML answers an s3:// store reads: an error (<Error><Code>...) and a
// page of ListObjectsV2 (<ListBucketResult>).  Both are flat, machine-written
// documents with a fixed set of elements, read here by element name; a full
// XML parser would be a dependency for five tags.
#ifndef STOKER_STORE_S3_XML_H_
#define STOKER_STORE_S3_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"
#include "stoker/store.h"

namespace stoker {

// The text of the first <tag>...</tag> in `xml` (entities decoded), or "".
std::string XmlText(const std::string& xml, const std::string& tag);
// &amp; &lt; &gt; &quot; &apos; and numeric references decoded.
std::string XmlUnescape(const std::string& s);

struct S3Error {
  std::string code;     // AccessDenied, NoSuchKey, SlowDown...
  std::string message;
};
// An S3 error body; empty fields when it is not one (a HEAD has no body).
S3Error ParseS3Error(const std::string& body);

struct S3ListPage {
  std::vector<StoreObject> objects;  // keys as S3 gives them (the prefix included)
  bool truncated = false;
  std::string next_token;            // NextContinuationToken
};
// One page of ListObjectsV2; DataLoss when it is not one.
Result<S3ListPage> ParseS3ListPage(const std::string& xml);

}  // namespace stoker

#endif  // STOKER_STORE_S3_XML_H_
