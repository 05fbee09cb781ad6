#include "store/s3_xml.h"

#include <cstdlib>

namespace stoker {

std::string XmlUnescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    const std::string ent = s.substr(i + 1, semi - i - 1);
    uint32_t cp = 0;
    if (ent == "amp") cp = '&';
    else if (ent == "lt") cp = '<';
    else if (ent == "gt") cp = '>';
    else if (ent == "quot") cp = '"';
    else if (ent == "apos") cp = '\'';
    else if (ent.size() > 1 && ent[0] == '#')
      cp = static_cast<uint32_t>(ent[1] == 'x' || ent[1] == 'X' ? std::strtoul(ent.c_str() + 2, nullptr, 16)
                                                                  : std::strtoul(ent.c_str() + 1, nullptr, 10));
    if (cp == 0 || cp > 0x10FFFF) {
      out += s[i];
      continue;
    }
    // UTF-8
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    i = semi;
  }
  return out;
}

namespace {

// [begin, end) of the first <tag>'s content at or after `from`; false if none.
bool Find(const std::string& xml, const std::string& tag, size_t from, size_t* begin, size_t* end) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t a = xml.find(open, from);
  if (a == std::string::npos) return false;
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string::npos) return false;
  *begin = a + open.size();
  *end = b;
  return true;
}

}  // namespace

std::string XmlText(const std::string& xml, const std::string& tag) {
  size_t b = 0, e = 0;
  return Find(xml, tag, 0, &b, &e) ? XmlUnescape(xml.substr(b, e - b)) : std::string();
}

S3Error ParseS3Error(const std::string& body) {
  S3Error e;
  if (body.find("<Error>") == std::string::npos) return e;
  e.code = XmlText(body, "Code");
  e.message = XmlText(body, "Message");
  return e;
}

Result<S3ListPage> ParseS3ListPage(const std::string& xml) {
  if (xml.find("<ListBucketResult") == std::string::npos)
    return Status::DataLoss("the answer to ListObjectsV2 is not a <ListBucketResult>: " + xml.substr(0, 200));
  S3ListPage page;
  size_t at = 0, b = 0, e = 0;
  while (Find(xml, "Contents", at, &b, &e)) {
    const std::string entry = xml.substr(b, e - b);
    StoreObject o;
    o.name = XmlText(entry, "Key");
    const std::string size = XmlText(entry, "Size");
    char* end = nullptr;
    o.size = std::strtoull(size.c_str(), &end, 10);
    if (o.name.empty() || size.empty() || *end != '\0')
      return Status::DataLoss("a <Contents> entry of ListObjectsV2 without a key or a size: " + entry.substr(0, 200));
    page.objects.push_back(std::move(o));
    at = e;
  }
  page.truncated = XmlText(xml, "IsTruncated") == "true";
  page.next_token = XmlText(xml, "NextContinuationToken");
  if (page.truncated && page.next_token.empty())
    return Status::DataLoss("ListObjectsV2 says the list is truncated but gives no NextContinuationToken");
  return page;
}

}  // namespace stoker
