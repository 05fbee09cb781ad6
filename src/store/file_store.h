// FileStore: a Store over a local or mounted directory (pread, copy_file_range).
#ifndef STOKER_STORE_FILE_STORE_H_
#define STOKER_STORE_FILE_STORE_H_

#include "stoker/store.h"

namespace stoker {

class FileStore : public Store {
 public:
  FileStore(std::string url, std::string dir) : Store(std::move(url)), dir_(std::move(dir)) {}
  std::string Locate(const std::string& name) const override { return dir_ + "/" + name; }
  Result<uint64_t> Size(const std::string& name) override;
  Status Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c = nullptr,
              const ReadReady* ready = nullptr) override;
  Status Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                  uint32_t* crc32c = nullptr) override;
  Result<std::string> ReadAll(const std::string& name) override;

 private:
  std::string dir_;
};

}  // namespace stoker

#endif  // STOKER_STORE_FILE_STORE_H_
