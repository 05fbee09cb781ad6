#include "io/tar_file.h"

#include <cstdio>
#include <cstring>

namespace stoker {

namespace {

constexpr uint64_t kBlock = 512;

std::string Field(const uint8_t* h, size_t at, size_t len) {
  size_t n = 0;
  while (n < len && h[at + n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(h + at), n);
}

// A numeric header field: octal text, or base-256 (high bit set) for large
// values.  False for garbage.
bool Number(const uint8_t* h, size_t at, size_t len, uint64_t* out) {
  const uint8_t* p = h + at;
  if (p[0] & 0x80) {
    uint64_t v = p[0] & 0x7f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | p[i];
    }
    *out = v;
    return true;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + (p[i] - '0');
  }
  for (; i < len; ++i)
    if (p[i] != ' ' && p[i] != 0) return false;
  *out = v;
  return true;
}

bool ChecksumOk(const uint8_t* h) {
  uint64_t stored;
  if (!Number(h, 148, 8, &stored)) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == stored;
}

bool AllZero(const uint8_t* h) {
  for (size_t i = 0; i < kBlock; ++i)
    if (h[i]) return false;
  return true;
}

// Why `path` is not safe inside a shard, or "".
std::string UnsafePath(const std::string& path) {
  if (path.empty()) return "an empty path";
  if (path[0] == '/') return "an absolute path";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) return "a '..' component (a path outside the shard)";
    start = end + 1;
  }
  return "";
}

// pax records: "<len> key=value\n"...
void ParsePax(const std::string& d, std::string* path, uint64_t* size, bool* has_size) {
  size_t at = 0;
  while (at < d.size()) {
    const size_t sp = d.find(' ', at);
    if (sp == std::string::npos) return;
    uint64_t len = 0;
    for (size_t i = at; i < sp; ++i) {
      if (d[i] < '0' || d[i] > '9') return;
      len = len * 10 + (d[i] - '0');
    }
    if (len == 0 || at + len > d.size()) return;
    const std::string rec = d.substr(sp + 1, at + len - sp - 2);  // without the newline
    const size_t eq = rec.find('=');
    if (eq != std::string::npos) {
      const std::string key = rec.substr(0, eq), val = rec.substr(eq + 1);
      if (key == "path") *path = val;
      if (key == "size") {
        uint64_t v = 0;
        bool ok = !val.empty();
        for (char c : val) ok = ok && c >= '0' && c <= '9', v = v * 10 + (c - '0');
        if (ok) *size = v, *has_size = true;
      }
    }
    at += len;
  }
}

}  // namespace

Result<TarListing> ListTar(const FileReader& file, bool skip_bad) {
  TarListing out;
  const uint64_t size = file.size();
  uint64_t off = 0;
  uint8_t h[kBlock];
  std::string long_name, pax_path;
  uint64_t pax_size = 0;
  bool pax_has_size = false;
  uint64_t entry_start = 0;  // first header of the current member (long-name/pax ones included)
  bool in_entry = false;
  auto where = [&](uint64_t at) { return "tar shard " + file.path() + ", header at byte offset " + std::to_string(at); };
  while (off + kBlock <= size) {
    STOKER_RETURN_IF_ERROR(file.ReadAt(off, h, kBlock));
    if (AllZero(h)) break;  // end of archive
    if (!in_entry) entry_start = off;
    std::string bad;
    uint64_t msize = 0;
    if (!ChecksumOk(h)) bad = "the header's checksum does not match (not a tar file, or corrupt)";
    else if (!Number(h, 124, 12, &msize)) bad = "the header's size field is not a number";
    else if (msize > size - off - kBlock)
      bad = "the member claims " + std::to_string(msize) + " bytes, but the file ends " +
            std::to_string(size - off - kBlock) + " bytes after its header (truncated shard?)";
    if (!bad.empty()) {
      // The rest of the archive cannot be walked.
      if (!skip_bad) return Status::DataLoss(where(off) + ": " + bad);
      out.bad.push_back(where(off) + ": " + bad);
      return out;
    }
    const char type = static_cast<char>(h[156]);
    const uint64_t data = off + kBlock;
    const uint64_t next = data + ((msize + kBlock - 1) / kBlock) * kBlock;
    if (type == 'L' || type == 'x') {  // GNU long name / pax header for the next member
      std::string d(msize, '\0');
      STOKER_RETURN_IF_ERROR(file.ReadAt(data, d.data(), msize));
      if (type == 'L') long_name = std::string(d.c_str());
      else ParsePax(d, &pax_path, &pax_size, &pax_has_size);
      in_entry = true;
      off = next;
      continue;
    }
    std::string path = Field(h, 0, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0) {
      const std::string prefix = Field(h, 345, 155);
      if (!prefix.empty()) path = prefix + "/" + path;
    }
    if (!long_name.empty()) path = long_name;
    if (!pax_path.empty()) path = pax_path;
    uint64_t real_size = pax_has_size ? pax_size : msize;
    uint64_t real_next = next;
    if (pax_has_size) {
      real_next = data + ((real_size + kBlock - 1) / kBlock) * kBlock;
      if (real_size > size - data) {
        if (!skip_bad) return Status::DataLoss(where(off) + ": member '" + path + "' runs past the end of the shard");
        out.bad.push_back(where(off) + ": member '" + path + "' runs past the end of the shard");
        return out;
      }
    }
    long_name.clear();
    pax_path.clear();
    pax_has_size = false;
    in_entry = false;
    off = real_next;
    if (type == '5' || type == 'g' || type == 'K' || type == 'V') continue;  // directories, global pax, labels
    std::string why;
    if (type == '1' || type == '2') why = "a link (to '" + Field(h, 157, 100) + "'); shards hold regular files only";
    else if (type != '0' && type != '\0' && type != '7') why = std::string("a member of type '") + type + "'";
    else why = UnsafePath(path);
    if (!why.empty()) {
      const std::string m = where(entry_start) + ": member '" + path + "' has " + why;
      if (!skip_bad) return Status::DataLoss(m);
      out.bad.push_back(m);
      continue;
    }
    while (path.size() > 2 && path.compare(0, 2, "./") == 0) path.erase(0, 2);
    out.members.push_back({path, entry_start, data, real_size});
  }
  return out;
}

void SplitTarKey(const std::string& path, std::string* key, std::string* ext) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find('.', base);
  if (dot == std::string::npos) {
    *key = path;
    ext->clear();
  } else {
    *key = path.substr(0, dot);
    *ext = path.substr(dot + 1);
  }
}

Status AppendTarMember(std::string* out, const std::string& path, const void* data, uint64_t n) {
  const std::string why = UnsafePath(path);
  if (!why.empty()) return Status::InvalidArgument("tar member '" + path + "' has " + why);
  uint8_t h[kBlock] = {};
  std::string name = path, prefix;
  if (name.size() > 100) {
    // ustar: split at a '/' into prefix (<=155) and name (<=100).
    size_t cut = std::string::npos;
    for (size_t i = 0; i < path.size(); ++i)
      if (path[i] == '/' && i <= 155 && path.size() - i - 1 <= 100) {
        cut = i;
        break;
      }
    if (cut == std::string::npos)
      return Status::InvalidArgument("tar member path '" + path + "' is too long for ustar (name 100 + prefix 155)");
    prefix = path.substr(0, cut);
    name = path.substr(cut + 1);
  }
  std::memcpy(h, name.data(), name.size());
  std::snprintf(reinterpret_cast<char*>(h + 100), 8, "%07o", 0644);
  std::snprintf(reinterpret_cast<char*>(h + 108), 8, "%07o", 0);
  std::snprintf(reinterpret_cast<char*>(h + 116), 8, "%07o", 0);
  if (n < (uint64_t{1} << 33)) {
    std::snprintf(reinterpret_cast<char*>(h + 124), 12, "%011llo", static_cast<unsigned long long>(n));
  } else {  // base-256
    h[124] = 0x80;
    for (int i = 0; i < 8; ++i) h[135 - i] = static_cast<uint8_t>(n >> (8 * i));
  }
  std::snprintf(reinterpret_cast<char*>(h + 136), 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 345, prefix.data(), prefix.size());
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
  h[155] = ' ';
  out->append(reinterpret_cast<const char*>(h), kBlock);
  out->append(static_cast<const char*>(data), n);
  out->append((kBlock - n % kBlock) % kBlock, '\0');
  return Status::OK();
}

void AppendTarEnd(std::string* out) { out->append(2 * kBlock, '\0'); }

}  // namespace stoker
