// TokenDataset (token_dataset.h).
#include "text/token_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>

#include "io/record_file_dataset.h"

namespace stoker {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr uint64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool IsTokenType(ElementType t) {
  switch (t) {
    case ElementType::kUInt8: case ElementType::kInt8: case ElementType::kInt16: case ElementType::kUInt16:
    case ElementType::kInt32: case ElementType::kUInt32: case ElementType::kInt64:
      return true;
    default:
      return false;
  }
}

// Token k of a buffer of `t` elements, widened.
int64_t TokenAt(const uint8_t* p, ElementType t, uint64_t k) {
  switch (t) {
    case ElementType::kUInt8: return p[k];
    case ElementType::kInt8: return Load<int8_t>(p + k);
    case ElementType::kInt16: return Load<int16_t>(p + 2 * k);
    case ElementType::kUInt16: return Load<uint16_t>(p + 2 * k);
    case ElementType::kInt32: return Load<int32_t>(p + 4 * k);
    case ElementType::kUInt32: return Load<uint32_t>(p + 4 * k);
    default: return Load<int64_t>(p + 8 * k);
  }
}

// Megatron's dtype codes (its DType enum).
Result<ElementType> MegatronDtype(uint8_t code, const std::string& idx) {
  switch (code) {
    case 1: return ElementType::kUInt8;
    case 2: return ElementType::kInt8;
    case 3: return ElementType::kInt16;
    case 4: return ElementType::kInt32;
    case 5: return ElementType::kInt64;
    case 8: return ElementType::kUInt16;
    case 6: case 7:
      return Status::InvalidArgument(idx + ": its .bin holds " + (code == 6 ? "float64" : "float32") +
                                     " elements, not token ids");
    default:
      return Status::InvalidArgument(idx + ": dtype code " + std::to_string(code) +
                                     " is not one of Megatron's (1-8): is it an indexed dataset's .idx?");
  }
}

Status OpenMegatron(const std::string& prefix, TokenDataset::File* f) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  STOKER_ASSIGN_OR_RETURN(FileReader idx, FileReader::Open(idx_path));
  if (idx.size() < kHeaderBytes)
    return Status::InvalidArgument(idx_path + " is " + std::to_string(idx.size()) +
                                   " bytes, shorter than a Megatron index's header (truncated?)");
  std::string head(kHeaderBytes, '\0');
  STOKER_RETURN_IF_ERROR(idx.ReadAt(0, head.data(), head.size()));
  const auto* h = reinterpret_cast<const uint8_t*>(head.data());
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0)
    return Status::InvalidArgument(idx_path + " does not begin with Megatron's index header (MMIDIDX): not an "
                                   "indexed dataset's .idx");
  const uint64_t version = Load<uint64_t>(h + 9);
  if (version != 1)
    return Status::InvalidArgument(idx_path + ": index version " + std::to_string(version) + " (this reads version 1)");
  STOKER_ASSIGN_OR_RETURN(f->dtype, MegatronDtype(h[17], idx_path));
  const uint64_t seqs = Load<uint64_t>(h + 18), docs = Load<uint64_t>(h + 26);
  const uint64_t want = kHeaderBytes + seqs * 12 + docs * 8;
  // (Megatron's multimodal index adds a mode byte per sequence.)
  if (seqs > (uint64_t{1} << 40) || docs > (uint64_t{1} << 40) || (idx.size() != want && idx.size() != want + seqs))
    return Status::InvalidArgument(idx_path + " is " + std::to_string(idx.size()) + " bytes, and an index of " +
                                   std::to_string(seqs) + " sequences and " + std::to_string(docs) +
                                   " document boundaries is " + std::to_string(want) + " (truncated?)");
  std::string body(seqs * 12 + docs * 8, '\0');
  STOKER_RETURN_IF_ERROR(idx.ReadAt(kHeaderBytes, body.data(), body.size()));
  const auto* sizes = reinterpret_cast<const uint8_t*>(body.data());
  const uint8_t* pointers = sizes + seqs * 4;
  const uint8_t* doc_idx = pointers + seqs * 8;
  STOKER_ASSIGN_OR_RETURN(f->reader, FileReader::Open(bin_path));
  f->name = bin_path;
  const uint64_t item = ElementSize(f->dtype);
  f->offset.resize(seqs);
  f->length.resize(seqs);
  uint64_t at = 0;
  for (uint64_t i = 0; i < seqs; ++i) {
    const int32_t n = Load<int32_t>(sizes + 4 * i);
    const int64_t p = Load<int64_t>(pointers + 8 * i);
    if (n < 0 || p < 0 || static_cast<uint64_t>(p) != at)
      return Status::InvalidArgument(idx_path + ": document " + std::to_string(i) + " has " + std::to_string(n) +
                                     " tokens at byte " + std::to_string(p) + ", where the documents before it end "
                                     "at byte " + std::to_string(at) + ": the index disagrees with itself");
    f->offset[i] = at;
    f->length[i] = static_cast<uint32_t>(n);
    at += static_cast<uint64_t>(n) * item;
    if (at > f->reader.size())
      return Status::InvalidArgument(bin_path + " ends at byte " + std::to_string(f->reader.size()) + ", and document " +
                                     std::to_string(i) + " of " + idx_path + " ends at byte " + std::to_string(at) +
                                     " (a truncated .bin?)");
  }
  if (at != f->reader.size())
    return Status::InvalidArgument(bin_path + " is " + std::to_string(f->reader.size()) + " bytes, and " + idx_path +
                                   "'s documents take " + std::to_string(at) + ": the .idx is not this .bin's");
  int64_t before = 0;
  for (uint64_t d = 0; d < docs; ++d) {
    const int64_t v = Load<int64_t>(doc_idx + 8 * d);
    if ((d == 0 && v != 0) || v < before || static_cast<uint64_t>(v) > seqs || (d + 1 == docs && static_cast<uint64_t>(v) != seqs))
      return Status::InvalidArgument(idx_path + ": document boundary " + std::to_string(d) + " is " + std::to_string(v) +
                                     " (boundaries go from 0 up to the " + std::to_string(seqs) +
                                     " sequences): the index disagrees with itself");
    before = v;
  }
  return Status::OK();
}

// The documents of `n` tokens of `dtype` at byte `start` of a flat file or
// .npy: each ends after an eos_id (or the file is one document).
Status SplitFlat(TokenDataset::File* f, uint64_t start, uint64_t n, int64_t eos) {
  const uint64_t item = ElementSize(f->dtype);
  uint64_t doc_start = 0;
  auto end_doc = [&](uint64_t end) -> Status {
    if (end - doc_start > UINT32_MAX)
      return Status::InvalidArgument(f->name + ": document " + std::to_string(f->offset.size()) + " has " +
                                     std::to_string(end - doc_start) + " tokens, more than a document may (2^32 - 1)");
    f->offset.push_back(start + doc_start * item);
    f->length.push_back(static_cast<uint32_t>(end - doc_start));
    doc_start = end;
    return Status::OK();
  };
  if (eos >= 0) {
    constexpr uint64_t kChunk = uint64_t{1} << 22;  // bytes a read
    std::vector<uint8_t> buf(kChunk);
    for (uint64_t k = 0; k < n;) {
      const uint64_t m = std::min<uint64_t>(n - k, kChunk / item);
      STOKER_RETURN_IF_ERROR(f->reader.ReadAt(start + k * item, buf.data(), m * item));
      for (uint64_t j = 0; j < m; ++j)
        if (TokenAt(buf.data(), f->dtype, j) == eos) STOKER_RETURN_IF_ERROR(end_doc(k + j + 1));
      k += m;
    }
  }
  if (doc_start < n || f->offset.empty()) STOKER_RETURN_IF_ERROR(end_doc(n));
  return Status::OK();
}

Status OpenFlat(const std::string& path, const TokenDatasetOptions& o, TokenDataset::File* f) {
  if (o.flat_dtype.empty())
    return Status::InvalidArgument(path + " has no .idx beside it, so it is a flat token file: say its dtype "
                                   "(\"uint16\" or \"uint32\")");
  STOKER_ASSIGN_OR_RETURN(f->dtype, ParseElementType(o.flat_dtype));
  if (f->dtype != ElementType::kUInt16 && f->dtype != ElementType::kUInt32)
    return Status::InvalidArgument("a flat token file's dtype is \"uint16\" or \"uint32\", not \"" + o.flat_dtype + "\"");
  STOKER_ASSIGN_OR_RETURN(f->reader, FileReader::Open(path));
  f->name = path;
  const uint64_t item = ElementSize(f->dtype);
  if (f->reader.size() % item != 0)
    return Status::InvalidArgument(path + " is " + std::to_string(f->reader.size()) + " bytes, not a whole number of " +
                                   o.flat_dtype + " tokens (truncated?)");
  return SplitFlat(f, 0, f->reader.size() / item, o.eos_id);
}

Status OpenNpy(const std::string& path, const TokenDatasetOptions& o, TokenDataset::File* f) {
  STOKER_ASSIGN_OR_RETURN(f->reader, FileReader::Open(path));
  f->name = path;
  STOKER_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(f->reader));
  if (h.shape.size() != 1 || !IsTokenType(h.dtype))
    return Status::InvalidArgument(path + ": a token .npy is a 1-D array of integers, and this one is " +
                                   std::to_string(h.shape.size()) + "-D of " + DTypeNameOf(h.dtype));
  f->dtype = h.dtype;
  return SplitFlat(f, h.data_offset, static_cast<uint64_t>(h.shape[0]), o.eos_id);
}

Status OpenOne(const std::string& path, const TokenDatasetOptions& o, TokenDataset::File* f) {
  std::string prefix = path;
  if (EndsWith(path, ".idx")) prefix = path.substr(0, path.size() - 4);
  else if (EndsWith(path, ".bin")) prefix = path.substr(0, path.size() - 4);
  if (EndsWith(path, ".npy")) return OpenNpy(path, o, f);
  if (Exists(prefix + ".idx") && Exists(prefix + ".bin")) return OpenMegatron(prefix, f);
  if (EndsWith(path, ".idx"))
    return Status::InvalidArgument(path + " has no " + prefix + ".bin beside it");
  if (EndsWith(path, ".bin") && Exists(path)) return OpenFlat(path, o, f);
  return Status::InvalidArgument(path + ": not a token file (a Megatron .bin/.idx pair or their prefix, a flat .bin, "
                                 "or a .npy)");
}

}  // namespace

Result<std::shared_ptr<TokenDataset>> TokenDataset::Open(const std::vector<std::string>& paths,
                                                         TokenDatasetOptions options) {
  if (paths.empty()) return Status::InvalidArgument("TokenDataset: no files");
  if (options.out != ElementType::kInt64 && options.out != ElementType::kInt32)
    return Status::InvalidArgument(std::string("TokenDataset: the samples' dtype is int64 or int32, not ") +
                                   DTypeNameOf(options.out));
  std::shared_ptr<TokenDataset> d(new TokenDataset());
  d->options_ = options;
  d->files_.resize(paths.size());
  // The files open on a few threads (a flat file is scanned once).
  const size_t threads = std::min<size_t>(paths.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::future<Status>> done;
  for (size_t t = 0; t < threads; ++t)
    done.push_back(std::async(std::launch::async, [&, t] {
      for (size_t i = t; i < paths.size(); i += threads) STOKER_RETURN_IF_ERROR(OpenOne(paths[i], options, &d->files_[i]));
      return Status::OK();
    }));
  Status first = Status::OK();
  for (auto& f : done) {
    Status st = f.get();
    if (first.ok() && !st.ok()) first = st;
  }
  STOKER_RETURN_IF_ERROR(first);
  d->first_doc_.assign(1, 0);
  for (const File& f : d->files_) {
    d->first_doc_.push_back(d->first_doc_.back() + f.length.size());
    for (uint32_t n : f.length) d->tokens_ += n;
  }
  d->fields_ = {FieldSpec{"input_ids", options.out, {}, true}};
  return d;
}

std::pair<size_t, uint64_t> TokenDataset::Locate(uint64_t index) const {
  const auto i = static_cast<size_t>(std::upper_bound(first_doc_.begin(), first_doc_.end(), index) - first_doc_.begin() - 1);
  return {i, index - first_doc_[i]};
}

uint32_t TokenDataset::DocumentLength(uint64_t index) const {
  const auto [i, d] = Locate(index);
  return files_[i].length[d];
}

Status TokenDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no document " + std::to_string(index));
  bytes[0] = static_cast<uint64_t>(DocumentLength(index)) * ElementSize(options_.out);
  return Status::OK();
}

Status TokenDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no document " + std::to_string(index));
  return ReadAs(index, 0, DocumentLength(index), options_.out, dst[0]);
}

Status TokenDataset::ReadTokens(uint64_t index, uint64_t offset, uint64_t n, int64_t* out) const {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no document " + std::to_string(index));
  const uint64_t length = DocumentLength(index);
  if (offset > length || n > length - offset)
    return Status::InvalidArgument(DescribeSample(index) + ": no tokens [" + std::to_string(offset) + ", " +
                                   std::to_string(offset + n) + ")");
  return ReadAs(index, offset, n, ElementType::kInt64, reinterpret_cast<uint8_t*>(out));
}

Status TokenDataset::ReadAs(uint64_t index, uint64_t offset, uint64_t n, ElementType out, uint8_t* dst) const {
  const auto [i, d] = Locate(index);
  const File& f = files_[i];
  const uint64_t item = ElementSize(f.dtype), at = f.offset[d] + offset * item;
  thread_local std::vector<uint8_t> raw;
  const bool direct = f.dtype == out;
  uint8_t* src = dst;
  if (!direct) {
    if (raw.size() < n * item) raw.resize(n * item);
    src = raw.data();
  }
  STOKER_RETURN_IF_ERROR(f.reader.ReadAt(at, src, n * item));
  const int64_t vocab = options_.vocab_size;
  for (uint64_t k = 0; k < n; ++k) {
    const int64_t t = TokenAt(src, f.dtype, k);
    if ((vocab > 0 && (t < 0 || t >= vocab)) || (out == ElementType::kInt32 && (t < INT32_MIN || t > INT32_MAX)))
      return Status::DataLoss("token " + std::to_string(t) + " at token " + std::to_string(offset + k) +
                              " of document " + std::to_string(d) + " of " + f.name + " (byte " +
                              std::to_string(at + k * item) + ") is outside " +
                              (vocab > 0 ? "the vocabulary (vocab_size=" + std::to_string(vocab) + ")"
                                         : std::string("int32")));
    if (!direct) {
      if (out == ElementType::kInt64) {
        std::memcpy(dst + 8 * k, &t, 8);
      } else {
        const auto v = static_cast<int32_t>(t);
        std::memcpy(dst + 4 * k, &v, 4);
      }
    }
  }
  return Status::OK();
}

std::string TokenDataset::Describe() const {
  return "token files (" + std::to_string(files_.size()) + ": " + files_[0].name + (files_.size() > 1 ? ", ..." : "") +
         "; " + std::to_string(size()) + " documents)";
}

std::string TokenDataset::DescribeSample(uint64_t index) const {
  if (index >= size()) return "document " + std::to_string(index) + " of " + Describe();
  const auto [i, d] = Locate(index);
  return "document " + std::to_string(d) + " of " + files_[i].name + " (byte " + std::to_string(files_[i].offset[d]) +
         ", " + std::to_string(files_[i].length[d]) + " tokens)";
}

}  // namespace stoker
