#include "io/tar_shard_dataset.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>

#include "io/record_file_dataset.h"

namespace stoker {

namespace {

bool IsIntExt(const std::string& e) {
  return e == "cls" || e == "cls2" || e == "index" || e == "idx" || e == "label" || e == "id";
}

}  // namespace

Result<std::unique_ptr<TarShardDataset>> TarShardDataset::Open(const std::vector<std::string>& paths,
                                                               std::vector<TarFieldDecl> fields,
                                                               TarShardOptions options) {
  if (paths.empty()) return Status::InvalidArgument("TarShardDataset: no shards given");
  STOKER_ASSIGN_OR_RETURN(std::vector<FileReader> files, FileReader::OpenAll(paths, {options.io, true}));
  return OpenFiles(std::move(files), std::move(fields), options);
}

Result<std::unique_ptr<TarShardDataset>> TarShardDataset::OpenFiles(std::vector<FileReader> files,
                                                                    std::vector<TarFieldDecl> fields,
                                                                    TarShardOptions options) {
  if (files.empty()) return Status::InvalidArgument("TarShardDataset: no shards given");
  std::unique_ptr<TarShardDataset> d(new TarShardDataset());
  d->set_on_error(options.on_error);
  const bool skip = options.on_error == OnError::kSkip;
  std::set<std::string> seen_ext;
  for (const TarFieldDecl& f : fields)
    if (!seen_ext.insert(f.ext).second)
      return Status::InvalidArgument("TarShardDataset: field '" + f.ext + "' is declared twice");
  std::vector<std::string> order;  // extensions in first-sample order (inference)
  for (FileReader& f : files) {
    const std::string& p = f.path();
    STOKER_ASSIGN_OR_RETURN(TarListing listing, ListTar(f, skip));
    for (const std::string& b : listing.bad) d->CountSkipped(Status::DataLoss(b));
    const uint32_t shard = static_cast<uint32_t>(d->files_.size());
    // Group by key, in order of first appearance.
    std::unordered_map<std::string, size_t> by_key;
    std::vector<std::vector<std::pair<std::string, size_t>>> groups;  // (ext, member)
    std::vector<std::string> keys;
    for (size_t m = 0; m < listing.members.size(); ++m) {
      std::string key, ext;
      SplitTarKey(listing.members[m].path, &key, &ext);
      auto [it, fresh] = by_key.emplace(key, groups.size());
      if (fresh) {
        groups.emplace_back();
        keys.push_back(key);
      }
      groups[it->second].emplace_back(ext, m);
    }
    if (fields.empty() && !groups.empty()) {
      for (const auto& [ext, m] : groups[0]) {
        if (ext.empty()) continue;
        TarFieldDecl decl;
        decl.ext = ext;
        const std::string last = ext.substr(ext.rfind('.') + 1);
        decl.kind = last == "npy" ? TarFieldKind::kNpy : IsIntExt(last) ? TarFieldKind::kInt : TarFieldKind::kBytes;
        fields.push_back(decl);
      }
      if (fields.empty())
        return Status::InvalidArgument("TarShardDataset: the first sample of " + p + " ('" + keys[0] +
                                       "') has no member with an extension to make a field of");
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      Sample s{shard, keys[g], std::vector<int64_t>(fields.size(), -1)};
      for (const auto& [ext, m] : groups[g])
        for (size_t f = 0; f < fields.size(); ++f)
          if (fields[f].ext == ext) s.member[f] = static_cast<int64_t>(m);
      d->samples_.push_back(std::move(s));
    }
    d->members_.push_back(std::move(listing.members));
    d->files_.push_back(std::move(f));
  }
  if (d->samples_.empty()) return Status::InvalidArgument("TarShardDataset: no samples in " + d->Describe());
  // Field specs; kNpy ones take the first sample's header.
  d->decls_ = std::move(fields);
  for (size_t f = 0; f < d->decls_.size(); ++f) {
    const TarFieldDecl& decl = d->decls_[f];
    FieldSpec spec;
    STOKER_ASSIGN_OR_RETURN(bool declared, DeclaredFieldSpec(decl, "TarShardDataset", &spec));
    if (!declared) {  // kNpy: the first sample's header
      const Sample& s = d->samples_[0];
      if (s.member[f] < 0)
        return Status::InvalidArgument("TarShardDataset: the first sample ('" + s.key + "' in " +
                                       d->files_[s.shard].path() + ") has no '" + decl.ext +
                                       "' member to take the field's dtype and shape from");
      const TarMember& m = d->members_[s.shard][s.member[f]];
      STOKER_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(d->files_[s.shard], m.data_offset, m.size,
                                                         d->files_[s.shard].path() + ":" + m.path));
      spec.dtype = h.dtype;
      spec.shape = h.shape;
    }
    d->specs_.push_back(std::move(spec));
  }
  return d;
}

Result<bool> DeclaredFieldSpec(const TarFieldDecl& decl, const std::string& what, FieldSpec* spec) {
  *spec = FieldSpec{decl.ext, ElementType::kUInt8, {}};
  switch (decl.kind) {
    case TarFieldKind::kRaw:
      spec->dtype = decl.dtype;
      spec->shape = decl.shape;
      STOKER_RETURN_IF_ERROR(ValidateFieldSpec(*spec, what + ": field '" + decl.ext + "'"));
      return true;
    case TarFieldKind::kInt: spec->dtype = ElementType::kInt64; return true;
    case TarFieldKind::kBytes: spec->variable = true; return true;
    case TarFieldKind::kNpy: return false;
  }
  return false;
}

Status TarShardDataset::Where(uint64_t index, const std::string& what) const {
  const Sample& s = samples_[index];
  return Status::DataLoss("tar shard " + files_[s.shard].path() + ", sample '" + s.key + "' (index " +
                          std::to_string(index) + "): " + what);
}

Status TarShardDataset::CheckIndex(uint64_t index) const {
  if (index < samples_.size()) return Status::OK();
  return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() + " (" +
                                 std::to_string(samples_.size()) + " samples)");
}

Status TarShardDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  STOKER_RETURN_IF_ERROR(CheckIndex(index));
  const Sample& s = samples_[index];
  for (size_t f = 0; f < specs_.size(); ++f) {
    if (!specs_[f].variable) {
      bytes[f] = specs_[f].bytes();
      continue;
    }
    if (s.member[f] < 0) return Where(index, "has no '" + decls_[f].ext + "' member");
    bytes[f] = members_[s.shard][s.member[f]].size;
  }
  return Status::OK();
}

Status TarShardDataset::Read(uint64_t index, uint8_t* const* dst) {
  STOKER_RETURN_IF_ERROR(CheckIndex(index));
  const Sample& s = samples_[index];
  const FileReader& file = files_[s.shard];
  for (size_t f = 0; f < specs_.size(); ++f) {
    const FieldSpec& spec = specs_[f];
    const TarFieldDecl& decl = decls_[f];
    if (s.member[f] < 0) return Where(index, "has no '" + decl.ext + "' member");
    const TarMember& m = members_[s.shard][s.member[f]];
    auto read = [&](uint64_t off, void* to, uint64_t n) -> Status {
      Status st = file.ReadOut(off, to, n);
      if (!st.ok() && st.message().find("truncated") != std::string::npos)
        return Where(index, "member '" + m.path + "': " + st.message());
      return st;
    };
    switch (decl.kind) {
      case TarFieldKind::kBytes:
        STOKER_RETURN_IF_ERROR(read(m.data_offset, dst[f], m.size));
        break;
      case TarFieldKind::kRaw:
        if (m.size != spec.bytes())
          return Where(index, "member '" + m.path + "' has " + std::to_string(m.size) + " bytes; declared " +
                                  DTypeNameOf(spec.dtype) + " " + ShapeString(spec.shape) + " needs " +
                                  std::to_string(spec.bytes()));
        STOKER_RETURN_IF_ERROR(read(m.data_offset, dst[f], m.size));
        break;
      case TarFieldKind::kInt: {
        char text[32];
        if (m.size == 0 || m.size >= sizeof text)
          return Where(index, "member '" + m.path + "' (" + std::to_string(m.size) +
                                  " bytes) is not an integer in ASCII");
        STOKER_RETURN_IF_ERROR(read(m.data_offset, text, m.size));
        text[m.size] = 0;
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text, &end, 10);
        while (end && *end && std::isspace(static_cast<unsigned char>(*end))) ++end;
        if (errno != 0 || end == text || (end && *end))
          return Where(index, "member '" + m.path + "' is not an integer in ASCII");
        const int64_t v64 = v;
        std::memcpy(dst[f], &v64, 8);
        break;
      }
      case TarFieldKind::kNpy: {
        Result<NpyHeader> h = ParseNpyHeader(file, m.data_offset, m.size, file.path() + ":" + m.path);
        if (!h.ok()) return Where(index, h.status().message());
        if (h.value().dtype != spec.dtype || h.value().shape != spec.shape)
          return Where(index, "member '" + m.path + "' is " + DTypeNameOf(h.value().dtype) + " " +
                                  ShapeString(h.value().shape) + ", the field is " + DTypeNameOf(spec.dtype) + " " +
                                  ShapeString(spec.shape) + " (from the first sample): every sample must be alike");
        STOKER_RETURN_IF_ERROR(read(h.value().data_offset, dst[f], spec.bytes()));
        break;
      }
    }
  }
  return Status::OK();
}

std::string TarShardDataset::Describe() const {
  if (files_.size() == 1) return "tar shard " + files_[0].path();
  return std::to_string(files_.size()) + " tar shards (" + (files_.empty() ? "" : files_[0].path()) + ", ...)";
}

}  // namespace stoker
