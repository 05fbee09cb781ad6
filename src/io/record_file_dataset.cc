#include "io/record_file_dataset.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

namespace stoker {

RecordFileDataset::RecordFileDataset(FileReader f, std::string kind, FieldSpec field, uint64_t data_offset,
                                     uint64_t count)
    : file_(std::move(f)), kind_(std::move(kind)), fields_{std::move(field)}, data_offset_(data_offset),
      record_bytes_(fields_[0].bytes()), count_(count) {}

Result<std::unique_ptr<RecordFileDataset>> RecordFileDataset::OpenRaw(const std::string& path, ElementType dtype,
                                                                      std::vector<int64_t> shape, IoMode io) {
  FieldSpec f{"", dtype, std::move(shape)};
  STOKER_RETURN_IF_ERROR(ValidateFieldSpec(f, "RawDataset " + path));
  const uint64_t rec = f.bytes();
  if (rec == 0) return Status::InvalidArgument("RawDataset " + path + ": records of 0 bytes");
  STOKER_ASSIGN_OR_RETURN(FileReader file, FileReader::Open(path, {io, false}));
  if (file.size() % rec != 0)
    return Status::InvalidArgument("RawDataset " + path + ": " + std::to_string(file.size()) +
                                   " bytes is not a whole number of " + std::to_string(rec) +
                                   "-byte records (" + std::to_string(file.size() / rec) + " records and " +
                                   std::to_string(file.size() % rec) +
                                   " bytes left over): wrong dtype or shape, or a truncated file");
  const uint64_t n = file.size() / rec;
  return std::unique_ptr<RecordFileDataset>(new RecordFileDataset(std::move(file), "raw file", std::move(f), 0, n));
}

namespace {

// The value after 'key': in a .npy header dict, e.g. 'descr': '<f4'.
std::string HeaderValue(const std::string& h, const std::string& key) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t p = h.find(':', k);
  if (p == std::string::npos) return "";
  ++p;
  while (p < h.size() && std::isspace(static_cast<unsigned char>(h[p]))) ++p;
  if (p >= h.size()) return "";
  if (h[p] == '\'') {
    const size_t e = h.find('\'', p + 1);
    return e == std::string::npos ? "" : h.substr(p + 1, e - p - 1);
  }
  if (h[p] == '(') {
    const size_t e = h.find(')', p);
    return e == std::string::npos ? "" : h.substr(p, e - p + 1);
  }
  size_t e = p;
  while (e < h.size() && (std::isalnum(static_cast<unsigned char>(h[e])))) ++e;
  return h.substr(p, e - p);
}

Result<ElementType> NpyDescr(const std::string& d, const std::string& path) {
  static const struct { const char* code; ElementType t; } kMap[] = {
      {"|b1", ElementType::kBool},     {"|u1", ElementType::kUInt8},    {"|i1", ElementType::kInt8},
      {"<i2", ElementType::kInt16},    {"<i4", ElementType::kInt32},    {"<i8", ElementType::kInt64},
      {"<u2", ElementType::kUInt16},   {"<u4", ElementType::kUInt32},   {"<u8", ElementType::kUInt64},
      {"<f2", ElementType::kFloat16},  {"<f4", ElementType::kFloat32},  {"<f8", ElementType::kFloat64},
      {"<c8", ElementType::kComplex64}, {"<c16", ElementType::kComplex128}};
  for (const auto& m : kMap)
    if (d == m.code) return m.t;
  return Status::InvalidArgument("NpyDataset " + path + ": dtype '" + d +
                                 "' is not supported (little-endian numbers and bool only)");
}

}  // namespace

Result<NpyHeader> ParseNpyHeader(const FileReader& file, uint64_t start, uint64_t size, const std::string& path) {
  uint8_t pre[12];
  if (size < 10) return Status::InvalidArgument("NpyDataset " + path + ": too short to be a .npy file");
  STOKER_RETURN_IF_ERROR(file.ReadAt(start, pre, std::min<uint64_t>(12, size)));
  if (std::memcmp(pre, "\x93NUMPY", 6) != 0)
    return Status::InvalidArgument("NpyDataset " + path + ": not a .npy file (bad magic)");
  const uint8_t major = pre[6];
  uint64_t header_len, header_at;
  if (major == 1) {
    header_len = pre[8] | (uint64_t{pre[9]} << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    header_len = pre[8] | (uint64_t{pre[9]} << 8) | (uint64_t{pre[10]} << 16) | (uint64_t{pre[11]} << 24);
    header_at = 12;
  } else {
    return Status::InvalidArgument("NpyDataset " + path + ": .npy format version " + std::to_string(major) +
                                   " is not supported");
  }
  if (header_at + header_len > size)
    return Status::InvalidArgument("NpyDataset " + path + ": header runs past the end of the file");
  std::string h(header_len, '\0');
  STOKER_RETURN_IF_ERROR(file.ReadAt(start + header_at, h.data(), header_len));
  // The header is a Python dict literal with three keys; anything else is
  // a damaged file, named as such (not as the first key that fails to parse).
  const size_t brace = h.find_first_not_of(" \t");
  const std::string order = HeaderValue(h, "fortran_order"), descr = HeaderValue(h, "descr"),
                    shape = HeaderValue(h, "shape");
  if (brace == std::string::npos || h[brace] != '{' || descr.empty() || shape.empty() || shape[0] != '(' ||
      (order != "True" && order != "False")) {
    std::string shown = h.substr(0, 60);
    for (char& c : shown)
      if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    return Status::InvalidArgument("NpyDataset " + path + ": the .npy header is damaged (expected a dict with 'descr', "
                                   "'fortran_order' and 'shape', found \"" + shown +
                                   "\"): the file is corrupt or was not written by numpy; write it again with np.save");
  }
  if (order == "True")
    return Status::InvalidArgument("NpyDataset " + path + ": Fortran-ordered arrays are not supported "
                                   "(save with np.ascontiguousarray)");
  NpyHeader out;
  STOKER_ASSIGN_OR_RETURN(out.dtype, NpyDescr(descr, path));
  const std::string& shape_s = shape;
  for (size_t i = 1; i < shape_s.size();) {
    while (i < shape_s.size() && !std::isdigit(static_cast<unsigned char>(shape_s[i]))) ++i;
    if (i >= shape_s.size()) break;
    int64_t v = 0;
    while (i < shape_s.size() && std::isdigit(static_cast<unsigned char>(shape_s[i]))) {
      if (v > (INT64_MAX - 9) / 10)
        return Status::InvalidArgument("NpyDataset " + path + ": a dimension in shape " + shape_s + " is too large");
      v = v * 10 + (shape_s[i++] - '0');
    }
    out.shape.push_back(v);
    if (out.shape.size() > 32) return Status::InvalidArgument("NpyDataset " + path + ": more than 32 dimensions");
  }
  out.data_offset = header_at + header_len;
  uint64_t bytes = ElementSize(out.dtype);
  for (int64_t d : out.shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      return Status::InvalidArgument("NpyDataset " + path + ": shape " + shape_s + " is too large");
  if (bytes > size || out.data_offset > size - bytes)
    return Status::InvalidArgument("NpyDataset " + path + ": the header declares " + std::to_string(bytes) +
                                   " bytes of data, but the file ends " +
                                   std::to_string(bytes - (size - std::min(size, out.data_offset))) +
                                   " bytes short (truncated file?)");
  out.data_offset += start;
  return out;
}

Result<std::unique_ptr<RecordFileDataset>> RecordFileDataset::OpenNpy(const std::string& path, IoMode io) {
  STOKER_ASSIGN_OR_RETURN(FileReader file, FileReader::Open(path, {io, false}));
  STOKER_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(file));
  if (h.shape.empty()) return Status::InvalidArgument("NpyDataset " + path + ": a 0-d array has no axis 0 to index");
  const uint64_t n = static_cast<uint64_t>(h.shape[0]);
  FieldSpec f{"", h.dtype, std::vector<int64_t>(h.shape.begin() + 1, h.shape.end())};
  return std::unique_ptr<RecordFileDataset>(
      new RecordFileDataset(std::move(file), "npy file", std::move(f), h.data_offset, n));
}

Status RecordFileDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= count_)
    return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() +
                                   " (" + std::to_string(count_) + " records)");
  return file_.ReadOut(data_offset_ + index * record_bytes_, dst[0], record_bytes_);
}

Status RecordFileDataset::ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts) {
  if (n == 1) return Read(indices[0], dsts);
  thread_local std::vector<std::pair<uint64_t, uint8_t*>> tls_pieces;
  std::vector<std::pair<uint64_t, uint8_t*>>& pieces = tls_pieces;  // (offset, destination)
  pieces.clear();
  bool sorted = true;
  for (uint64_t k = 0; k < n; ++k) {
    if (indices[k] >= count_)
      return Status::InvalidArgument("index " + std::to_string(indices[k]) + " is out of range for " + Describe() +
                                     " (" + std::to_string(count_) + " records)");
    sorted = sorted && (k == 0 || indices[k] >= indices[k - 1]);
    pieces.emplace_back(data_offset_ + indices[k] * record_bytes_, dsts[k]);
  }
  if (!sorted) std::sort(pieces.begin(), pieces.end());
  return file_.ReadOutPieces(pieces.data(), n, record_bytes_);
}

Result<std::unique_ptr<NpyDirDataset>> NpyDirDataset::Open(const std::string& dir) {
  std::unique_ptr<NpyDirDataset> d(new NpyDirDataset());
  d->dir_ = dir;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy") d->files_.push_back(e.path().string());
  if (ec) return Status::IOError("listing " + dir, ec.value());
  if (d->files_.empty()) return Status::InvalidArgument("NpyDataset " + dir + ": no .npy files in the directory");
  std::sort(d->files_.begin(), d->files_.end());
  STOKER_ASSIGN_OR_RETURN(FileReader first, FileReader::Open(d->files_[0]));
  STOKER_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(first));
  d->fields_.push_back(FieldSpec{"", h.dtype, h.shape});
  return d;
}

Status NpyDirDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= files_.size())
    return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() + " (" +
                                   std::to_string(files_.size()) + " files)");
  STOKER_ASSIGN_OR_RETURN(FileReader file, FileReader::Open(files_[index]));
  STOKER_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(file));
  const FieldSpec& f = fields_[0];
  if (h.dtype != f.dtype || h.shape != f.shape) {
    std::string want, got;
    for (int64_t v : f.shape) want += std::to_string(v) + ",";
    for (int64_t v : h.shape) got += std::to_string(v) + ",";
    return Status::InvalidArgument("NpyDataset " + files_[index] + ": shape (" + got + ") " +
                                   DTypeNameOf(h.dtype) + " differs from the first file's (" + want + ") " +
                                   DTypeNameOf(f.dtype) + " (" + files_[0] + "): every file must be alike");
  }
  return file.ReadOut(h.data_offset, dst[0], f.bytes());
}

}  // namespace stoker
