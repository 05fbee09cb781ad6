#include "parquet/store_file.h"

#include <arrow/buffer.h>

#include <algorithm>

namespace stoker {

bool IsRemotePath(const std::string& path) {
  return path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0 || path.rfind("s3://", 0) == 0;
}

Result<std::shared_ptr<StoreFile>> StoreFile::Open(const std::string& url, const StoreOptions& options,
                                                   std::shared_ptr<FetchCounters> counters) {
  const size_t slash = url.rfind('/');
  if (slash == std::string::npos || slash + 1 >= url.size() || url.find("://") + 3 > slash)
    return Status::InvalidArgument(url + " names no object (a URL of a file: http://host/dir/a.parquet, "
                                   "s3://bucket/prefix/a.parquet)");
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(url.substr(0, slash), options));
  const std::string name = url.substr(slash + 1);
  STOKER_ASSIGN_OR_RETURN(uint64_t size, store->Size(name));
  counters->requests.fetch_add(1, std::memory_order_relaxed);
  return std::shared_ptr<StoreFile>(new StoreFile(std::move(store), name, size, std::move(counters)));
}

arrow::Status StoreFile::Close() {
  closed_ = true;
  return arrow::Status::OK();
}

arrow::Status StoreFile::Seek(int64_t position) {
  if (position < 0) return arrow::Status::Invalid("negative position");
  pos_ = position;
  return arrow::Status::OK();
}

arrow::Result<int64_t> StoreFile::Read(int64_t nbytes, void* out) {
  if (closed_) return arrow::Status::Invalid(store_->Locate(name_), " is closed");
  const uint64_t at = static_cast<uint64_t>(pos_);
  const uint64_t n = at >= size_ ? 0 : std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(nbytes, 0)), size_ - at);
  if (n > 0) {
    Status st = store_->Read(name_, at, n, out);
    if (!st.ok()) return arrow::Status::IOError(st.message());
    counters_->requests.fetch_add(1, std::memory_order_relaxed);
    counters_->bytes.fetch_add(n, std::memory_order_relaxed);
  }
  pos_ += static_cast<int64_t>(n);
  return static_cast<int64_t>(n);
}

arrow::Result<std::shared_ptr<arrow::Buffer>> StoreFile::Read(int64_t nbytes) {
  const int64_t n = std::max<int64_t>(0, std::min<int64_t>(nbytes, static_cast<int64_t>(size_) - pos_));
  ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ResizableBuffer> buf, arrow::AllocateResizableBuffer(n));
  ARROW_ASSIGN_OR_RAISE(int64_t got, Read(n, buf->mutable_data()));
  ARROW_RETURN_NOT_OK(buf->Resize(got));
  return std::shared_ptr<arrow::Buffer>(std::move(buf));
}

}  // namespace stoker
