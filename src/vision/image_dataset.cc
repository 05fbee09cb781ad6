// ImageDataset (include/stoker/image_dataset.h) and the file list under
// ImageFolderDataset (vision/file_list.h).
#include "stoker/image_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/mix.h"
#include "core/stage.h"
#include "core/unique_fd.h"
#include "vision/file_list.h"

namespace stoker {

namespace {

class FileList : public NativeDataset {
 public:
  FileList(std::vector<std::string> paths, std::vector<int64_t> labels)
      : paths_(std::move(paths)), labels_(std::move(labels)) {
    fields_.push_back(FieldSpec{"image", ElementType::kUInt8, {}, true});
    fields_.push_back(FieldSpec{"label", ElementType::kInt64, {}, false});
  }
  uint64_t size() const override { return paths_.size(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  SampleStructure structure() const override { return SampleStructure::kTuple; }
  std::string Describe() const override { return "a list of " + std::to_string(paths_.size()) + " image files"; }
  std::string DescribeSample(uint64_t index) const override {
    return index < paths_.size() ? "sample " + std::to_string(index) + " (" + paths_[index] + ")"
                                 : "sample " + std::to_string(index);
  }

  Status SampleBytes(uint64_t index, uint64_t* bytes) override {
    STOKER_RETURN_IF_ERROR(CheckIndex(index));
    struct stat st{};
    if (::stat(paths_[index].c_str(), &st) != 0) return Status::IOError(paths_[index], errno);
    bytes[0] = static_cast<uint64_t>(st.st_size);
    bytes[1] = 8;
    last_ = {this, index, bytes[0]};  // Read's room, for this thread: this size
    return Status::OK();
  }

  Status Read(uint64_t index, uint8_t* const* dst) override {
    STOKER_RETURN_IF_ERROR(CheckIndex(index));
    const std::string& path = paths_[index];
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Status::IOError(path, errno);
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) return Status::IOError(path, errno);
    // The room there is: the size SampleBytes saw.  A file that changed
    // size since is refused, never read past its room nor cut short.
    if (last_.owner != this || last_.index != index)
      return Status::Internal(path + ": read without its size asked just before (SampleBytes)");
    const uint64_t want = last_.bytes;
    if (static_cast<uint64_t>(st.st_size) != want)
      return Status::DataLoss(path + ": the file changed size (" + std::to_string(want) + " to " +
                              std::to_string(st.st_size) + " bytes) while being read");
    uint64_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd.get(), dst[0] + got, want - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::IOError(path, errno);
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    if (got != want) return Status::DataLoss(path + ": the file shrank while being read");
    std::memcpy(dst[1], &labels_[index], 8);
    return Status::OK();
  }

 private:
  // The size SampleBytes last gave this thread: another thread's look at
  // a file that changed meanwhile cannot change this thread's room.  (Its
  // one caller, ImageDataset, asks and reads one file at a time.)
  struct Last {
    const FileList* owner = nullptr;
    uint64_t index = 0, bytes = 0;
  };
  static thread_local Last last_;

  Status CheckIndex(uint64_t index) const {
    if (index >= paths_.size())
      return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe());
    return Status::OK();
  }
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
  std::vector<FieldSpec> fields_;
};

thread_local FileList::Last FileList::last_;

}  // namespace

Result<std::shared_ptr<NativeDataset>> FileListDataset(std::vector<std::string> paths, std::vector<int64_t> labels) {
  if (paths.size() != labels.size())
    return Status::InvalidArgument("FileListDataset: " + std::to_string(paths.size()) + " paths but " +
                                   std::to_string(labels.size()) + " labels");
  return std::shared_ptr<NativeDataset>(std::make_shared<FileList>(std::move(paths), std::move(labels)));
}

Result<std::shared_ptr<ImageDataset>> ImageFolderDataset(std::vector<std::string> paths, std::vector<int64_t> labels,
                                                        std::shared_ptr<const ImagePipeline> transform,
                                                        uint64_t max_pixels) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<NativeDataset> files, FileListDataset(std::move(paths), std::move(labels)));
  return ImageDataset::Make(std::move(files), "image", std::move(transform), max_pixels);
}

Result<std::shared_ptr<ImageDataset>> ImageDataset::Make(std::shared_ptr<NativeDataset> base,
                                                         const std::string& image_field,
                                                         std::shared_ptr<const ImagePipeline> transform,
                                                         uint64_t max_pixels) {
  std::shared_ptr<ImageDataset> d(new ImageDataset());
  const std::vector<FieldSpec>& in = base->fields();
  size_t f = in.size();
  std::string names;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].name == image_field) f = i;
    names += (i ? ", " : "") + ("'" + in[i].name + "'");
  }
  if (f == in.size())
    return Status::InvalidArgument(base->Describe() + " has no field '" + image_field + "' (its fields: " + names +
                                   ")");
  if (!in[f].variable || in[f].dtype != ElementType::kUInt8)
    return Status::InvalidArgument(base->Describe() + ": field '" + image_field +
                                   "' must hold the encoded image's bytes (a variable-length uint8 field, e.g. a "
                                   "tar member declared \"bytes\")");
  if (max_pixels == 0) return Status::InvalidArgument("max_image_pixels must be > 0");
  if (!transform) {  // decode only: CHW uint8
    STOKER_ASSIGN_OR_RETURN(transform, ImagePipeline::Make({}));
  }
  FieldSpec out = in[f];
  out.dtype = transform->dtype();
  if (transform->fixed_size()) {
    out.variable = false;
    out.shape = {3, transform->fixed_height(), transform->fixed_width()};
  }
  d->fields_ = in;
  d->fields_[f] = out;
  d->base_ = std::move(base);
  d->transform_ = std::move(transform);
  d->field_ = f;
  d->max_pixels_ = max_pixels;
  d->set_on_error(d->base_->on_error());
  return d;
}

std::string ImageDataset::Describe() const {
  return "images of " + base_->Describe() + (transform_->ops().empty() ? "" : " with " + transform_->Describe());
}

Status ImageDataset::BeginEpoch(uint64_t epoch) {
  SetEpoch(epoch);
  return base_->BeginEpoch(epoch);
}

void ImageDataset::SetEpoch(uint64_t epoch) {
  NativeDataset::SetEpoch(epoch);
  base_->SetEpoch(epoch);
}

uint64_t ImageDataset::RandomWord(uint64_t index) const {
  return Mix64(seed_.load(std::memory_order_relaxed) ^ Mix64(epoch() ^ Mix64(index ^ 0x1a5e0f11ull)));
}

Status ImageDataset::Fail(uint64_t index, const Status& why) const {
  return Status::FromCode(why.code(), base_->DescribeSample(index) + ": " + why.message());
}

Status ImageDataset::ReadBase(uint64_t index, const uint64_t* sizes, uint8_t* const* dst,
                              const std::vector<uint8_t>** encoded) {
  thread_local std::vector<uint8_t*> bdst;
  thread_local std::vector<uint8_t> bytes;
  bytes.resize(sizes[field_]);
  bdst.assign(dst, dst + base_->fields().size());
  bdst[field_] = bytes.data();
  STOKER_RETURN_IF_ERROR(base_->Read(index, bdst.data()));
  *encoded = &bytes;
  return Status::OK();
}

Status ImageDataset::ReadWith(uint64_t index, uint64_t random, uint8_t* const* dst, int64_t* h, int64_t* w) {
  thread_local std::vector<uint64_t> sizes;
  sizes.assign(base_->fields().size(), 0);
  STOKER_RETURN_IF_ERROR(base_->SampleBytes(index, sizes.data()));
  const std::vector<uint8_t>* encoded = nullptr;
  STOKER_RETURN_IF_ERROR(ReadBase(index, sizes.data(), dst, &encoded));
  thread_local std::vector<uint8_t> pixels;
  const uint8_t* data = encoded->data();
  const size_t size = encoded->size();
  ImageInfo info;
  ImageBox part;
  bool partial = false;
  EnterStage(Stage::kDecode);
  // A JPEG whose steps read only part of it: only that part is decoded.
  if (transform_->ReadsPart() && size >= 3 && data[0] == 0xFF && data[1] == 0xD8) {
    Result<ImageBox> got = DecodeJpegBox(
        data, size, [&](int64_t ih, int64_t iw, ImageBox* box) { return transform_->SourceBox(ih, iw, random, box); },
        max_pixels_, &pixels, &info);
    if (got.ok()) {
      part = got.value();
      partial = true;
    } else if (got.status().IsDataLoss()) {
      LeaveStage();
      return Fail(index, got.status());
    }  // else (no box, CMYK, no end marker): decoded whole, which names any damage
  }
  if (!partial) {
    Result<ImageInfo> r = DecodeImage(data, size, max_pixels_, &pixels);
    if (!r.ok()) {
      LeaveStage();
      return Fail(index, r.status());
    }
    info = r.value();
  }
  LeaveStage();
  transform_->OutputSize(info.height, info.width, h, w);
  Status st = [&] {
    StageScope transforming(Stage::kTransform);
    return transform_->Run(pixels.data(), info.height, info.width, random, dst[field_], partial ? &part : nullptr);
  }();
  return st.ok() ? st : Fail(index, st);
}

Status ImageDataset::Read(uint64_t index, uint8_t* const* dst) {
  int64_t h = 0, w = 0;
  return ReadWith(index, RandomWord(index), dst, &h, &w);
}

Status ImageDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  STOKER_RETURN_IF_ERROR(base_->SampleBytes(index, bytes));
  const FieldSpec& out = fields_[field_];
  if (!out.variable) {
    bytes[field_] = out.bytes();
    return Status::OK();
  }
  // Each image its own size: read the header.
  const size_t nf = fields_.size();
  thread_local std::vector<std::vector<uint8_t>> others;
  thread_local std::vector<uint8_t*> odst;
  others.resize(nf);
  odst.resize(nf);
  for (size_t f = 0; f < nf; ++f) {
    others[f].resize(f == field_ ? 0 : bytes[f]);
    odst[f] = others[f].data();
  }
  const std::vector<uint8_t>* encoded = nullptr;
  STOKER_RETURN_IF_ERROR(ReadBase(index, bytes, odst.data(), &encoded));
  Result<ImageInfo> info = ReadImageInfo(encoded->data(), encoded->size());
  if (!info.ok()) return Fail(index, info.status());
  int64_t h = info.value().height, w = info.value().width;
  if (Status st = CheckImagePixels(h, w, max_pixels_); !st.ok()) return Fail(index, st);
  transform_->OutputSize(h, w, &h, &w);
  bytes[field_] = static_cast<uint64_t>(3 * h * w) * ElementSize(out.dtype);
  return Status::OK();
}

}  // namespace stoker
