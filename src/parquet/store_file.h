// StoreFile: an object of a stoker::Store (http(s)://, s3://) as Arrow's
// RandomAccessFile, so that Arrow's Parquet reader fetches a remote file's
// footer and the column chunks it reads by range requests, and nothing
// more.  One Store (one connection) per StoreFile; Arrow's ReadAt calls are
// serialised by its RandomAccessFile (Seek, then Read, under its lock).
#ifndef STOKER_PARQUET_STORE_FILE_H_
#define STOKER_PARQUET_STORE_FILE_H_

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "stoker/store.h"

namespace stoker {

// Counters shared by the StoreFiles of a dataset.
struct FetchCounters {
  std::atomic<uint64_t> requests{0}, bytes{0};
};

class StoreFile : public arrow::io::RandomAccessFile {
 public:
  // `url` names the object: its directory is the store's URL, the rest the
  // object's name.  The size is asked once (a HEAD request).
  static Result<std::shared_ptr<StoreFile>> Open(const std::string& url, const StoreOptions& options,
                                                 std::shared_ptr<FetchCounters> counters);

  arrow::Status Close() override;
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> Tell() const override { return pos_; }
  arrow::Status Seek(int64_t position) override;
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override;
  arrow::Result<int64_t> GetSize() override { return static_cast<int64_t>(size_); }

 private:
  StoreFile(std::unique_ptr<Store> store, std::string name, uint64_t size, std::shared_ptr<FetchCounters> c)
      : store_(std::move(store)), name_(std::move(name)), size_(size), counters_(std::move(c)) {}
  std::unique_ptr<Store> store_;
  std::string name_;
  uint64_t size_;
  std::shared_ptr<FetchCounters> counters_;
  int64_t pos_ = 0;
  bool closed_ = false;
};

// Whether `path` is a URL of a remote store (http://, https://, s3://).
bool IsRemotePath(const std::string& path);

}  // namespace stoker

#endif  // STOKER_PARQUET_STORE_FILE_H_
