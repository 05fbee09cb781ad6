// FaultStore: a test double of a Store that fails on cue.  It reads a real
// directory (through the FileStore that Store::Open gives for it) and,
// where its FaultPlan says so, a call for a named object fails after half
// its bytes (Read, Download), or hands back corrupt bytes.  Every
// connection made from one plan shares it, so a test scripts the faults of
// all a dataset's fetchers at once, and counts their calls.
#ifndef STOKER_TESTS_FAULT_STORE_H_
#define STOKER_TESTS_FAULT_STORE_H_

#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "io/crc32c.h"
#include "stoker/store.h"

namespace stoker::testing {

struct FaultPlan {
  std::mutex mu;
  std::map<std::string, int> fail_next;  // object -> calls still to fail
  Status failure = Status::IOError("injected: the store went away", ECONNRESET);
  std::map<std::string, bool> corrupt;   // object -> its bytes come back with one flipped
  std::map<std::string, int> calls;      // object -> Read/Download calls made

  // Whether this call of `name` fails (counting it).
  bool Fails(const std::string& name) {
    std::lock_guard<std::mutex> g(mu);
    ++calls[name];
    auto it = fail_next.find(name);
    if (it == fail_next.end() || it->second == 0) return false;
    --it->second;
    return true;
  }
  bool Corrupts(const std::string& name) {
    std::lock_guard<std::mutex> g(mu);
    return corrupt[name];
  }
  int Calls(const std::string& name) {
    std::lock_guard<std::mutex> g(mu);
    return calls[name];
  }
};

class FaultStore : public Store {
 public:
  FaultStore(std::unique_ptr<Store> real, std::shared_ptr<FaultPlan> plan)
      : Store(real->url()), real_(std::move(real)), plan_(std::move(plan)) {}

  // A factory for StreamingOptions::open_store: connections to `dir` that
  // share `plan`.
  static std::function<Result<std::unique_ptr<Store>>()> Factory(std::string dir, std::shared_ptr<FaultPlan> plan) {
    return [dir, plan]() -> Result<std::unique_ptr<Store>> {
      STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> real, Store::Open(dir));
      return std::unique_ptr<Store>(new FaultStore(std::move(real), plan));
    };
  }

  std::string Locate(const std::string& name) const override { return real_->Locate(name); }
  Result<uint64_t> Size(const std::string& name) override { return real_->Size(name); }
  Result<std::string> ReadAll(const std::string& name) override { return real_->ReadAll(name); }

  Status Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c,
              const ReadReady* ready) override {
    if (plan_->Fails(name)) {
      (void)real_->Read(name, offset, n / 2, dst, nullptr, ready);  // half of it arrived
      return plan_->failure;
    }
    STOKER_RETURN_IF_ERROR(real_->Read(name, offset, n, dst, crc32c, ready));
    if (plan_->Corrupts(name) && n > 0) static_cast<uint8_t*>(dst)[n / 2] ^= 0x40;  // (after the CRC: as a bad wire would)
    bytes_ += n;
    return Status::OK();
  }

  Status Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                  uint32_t* crc32c) override {
    if (plan_->Fails(name)) {
      // Half of what is missing lands in the file, then the connection dies.
      STOKER_ASSIGN_OR_RETURN(uint64_t size, real_->Size(name));
      const off_t have = lseek(fd, 0, SEEK_END);
      if (have < 0) return Status::IOError("lseek", errno);
      std::string half((size - static_cast<uint64_t>(have)) / 2, '\0');
      STOKER_RETURN_IF_ERROR(real_->Read(name, static_cast<uint64_t>(have), half.size(), half.data()));
      if (write(fd, half.data(), half.size()) != static_cast<ssize_t>(half.size())) return Status::IOError("write", errno);
      return plan_->failure;
    }
    if (!plan_->Corrupts(name)) {
      Status st = real_->Download(name, fd, expected_size, bytes, crc32c);
      if (st.ok()) bytes_ += *bytes;
      return st;
    }
    STOKER_ASSIGN_OR_RETURN(std::string all, real_->ReadAll(name));
    if (!all.empty()) all[all.size() / 2] ^= 0x40;
    if (write(fd, all.data(), all.size()) != static_cast<ssize_t>(all.size())) return Status::IOError("write", errno);
    *bytes = all.size();
    if (crc32c) *crc32c = Crc32cExtend(*crc32c, all.data(), all.size());  // of the bytes written, as a store does
    bytes_ += all.size();
    return Status::OK();
  }

 private:
  std::unique_ptr<Store> real_;
  std::shared_ptr<FaultPlan> plan_;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_FAULT_STORE_H_
