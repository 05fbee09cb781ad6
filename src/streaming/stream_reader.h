// StreamReader: StreamingDataset::OpenReader's dataset (include/stoker/
// streaming.h), for a process that did not open the dataset: samples read
// from the shard that holds them, fetched on demand through the shared cache
// directory.
#ifndef STOKER_STREAMING_STREAM_READER_H_
#define STOKER_STREAMING_STREAM_READER_H_

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/shard_cache.h"
#include "stoker/streaming.h"

namespace stoker {

class StreamReader : public NativeDataset {
 public:
  static Result<std::shared_ptr<StreamReader>> Open(const StreamingOptions& options);

  uint64_t size() const override { return firsts_.back(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;

 private:
  static constexpr size_t kKeepOpen = 8;  // a batch's samples span the shuffle window's shards
  struct OpenShard {
    size_t k;
    ShardCache::Pin pin;
    std::shared_ptr<NativeDataset> data;
  };

  StreamReader() = default;
  // Sample `index`'s shard, opened, and its index there.
  Result<std::shared_ptr<NativeDataset>> Locate(uint64_t index, uint64_t* local);
  // Under mu_: shard k pinned (downloaded first if need be) and opened.
  Result<std::shared_ptr<NativeDataset>> ShardLocked(size_t k);

  StreamingOptions o_;
  std::vector<uint64_t> firsts_{0};   // shard k's samples are [firsts_[k], firsts_[k + 1])
  std::vector<FieldSpec> fields_;
  std::vector<TarFieldDecl> decls_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ShardCache> cache_;
  std::mutex mu_;                     // (one shard opening at a time)
  std::list<OpenShard> open_;         // most recently read first
};

}  // namespace stoker

#endif  // STOKER_STREAMING_STREAM_READER_H_
