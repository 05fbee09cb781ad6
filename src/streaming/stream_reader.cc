#include "streaming/stream_reader.h"

#include <algorithm>

#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "streaming/shard_open.h"

namespace stoker {

Result<std::shared_ptr<NativeDataset>> StreamingDataset::OpenReader(const StreamingOptions& options) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<StreamReader> r, StreamReader::Open(options));
  return std::shared_ptr<NativeDataset>(std::move(r));
}

Result<std::shared_ptr<StreamReader>> StreamReader::Open(const StreamingOptions& o) {
  const std::string what = "StreamingDataset(" + o.remote + ")";
  if (o.mode != StreamingMode::kFull)
    return Status::InvalidArgument(
        what + ": an epoch of mode='cached' is the shards cached when it began, known only to the process that "
               "opened it, so it cannot be read in a worker process; open it with mode='full' (every shard of the "
               "index, the same in every process), or read it with stoker.DataLoader's native threads (no Python "
               "transform or collate_fn) or num_workers=0");
  if (o.max_bytes == 0)
    return Status::InvalidArgument(
        what + ": max_bytes=0 streams shards through the opening process's memory; worker processes read shards "
               "through the cache directory they share, so give it room (max_bytes > 0)");
  if (o.shards.empty()) return Status::InvalidArgument(what + ": a reader needs the dataset's shards (none given)");
  std::shared_ptr<StreamReader> r(new StreamReader());
  r->o_ = o;
  for (const ShardInfo& s : o.shards) {
    if (!s.has_samples)
      return Status::InvalidArgument(what + ": shard " + s.name + " has no sample count; a reader needs the index's");
    r->firsts_.push_back(r->firsts_.back() + s.samples);
  }
  r->set_on_error(o.on_error);
  if (o.format == ShardFormat::kTFRecord) {
    STOKER_RETURN_IF_ERROR(ValidateTFRecordFeatures(o.features, what));
    r->fields_ = o.features;
  } else {
    r->decls_ = o.tar_fields;
    STOKER_ASSIGN_OR_RETURN(r->fields_, DeclaredTarFields(r->decls_, what));
  }
  STOKER_ASSIGN_OR_RETURN(r->store_, o.open_store ? o.open_store() : Store::Open(o.remote, o.store));
  STOKER_ASSIGN_OR_RETURN(r->cache_, ShardCache::Open(o.local, o.max_bytes, o.eviction, o.shards, o.durable));
  if (r->fields_.empty()) {  // tar fields not all declared: the first shard tells them
    std::lock_guard<std::mutex> g(r->mu_);
    STOKER_RETURN_IF_ERROR(r->ShardLocked(0).status());
  }
  return r;
}

std::string StreamReader::Describe() const {
  return "streaming dataset " + o_.remote + " read through " + o_.local + " (a worker's reader)";
}

Result<std::shared_ptr<NativeDataset>> StreamReader::ShardLocked(size_t k) {
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    if (it->k != k) continue;
    open_.splice(open_.begin(), open_, it);  // most recent first
    return open_.front().data;
  }
  const ShardInfo& info = o_.shards[k];
  STOKER_ASSIGN_OR_RETURN(ShardCache::Pin pin, cache_->Fetch(*store_, info));
  // Mapped (TFRecord) or read with pread (tar), as the native datasets do.
  const IoMode io = o_.format == ShardFormat::kTFRecord ? TFRecordOptions{}.io : TarShardOptions{}.io;
  STOKER_ASSIGN_OR_RETURN(FileReader file, FileReader::Open(pin.path(), {io, true}));
  std::vector<TarFieldDecl> learned;
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<NativeDataset> d,
                          OpenShardFile(o_, decls_, std::move(file), cache_->index_dir(),
                                        pin.downloaded() && info.has_crc, false, &learned));
  if (fields_.empty()) {  // the first shard opened says what the fields are
    fields_ = d->fields();
    if (decls_.empty()) decls_ = learned;
  }
  STOKER_RETURN_IF_ERROR(CheckShard(*d, info, fields_, o_.on_error));
  open_.push_front(OpenShard{k, std::move(pin), std::shared_ptr<NativeDataset>(std::move(d))});
  while (open_.size() > kKeepOpen) open_.pop_back();  // (its pin released: the cache may evict it)
  return open_.front().data;
}

Result<std::shared_ptr<NativeDataset>> StreamReader::Locate(uint64_t index, uint64_t* local) {
  if (index >= size())
    return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() + " (" +
                                   std::to_string(size()) + " samples an epoch)");
  const size_t k = static_cast<size_t>(std::upper_bound(firsts_.begin(), firsts_.end(), index) - firsts_.begin()) - 1;
  *local = index - firsts_[k];
  std::lock_guard<std::mutex> g(mu_);
  return ShardLocked(k);
}

Status StreamReader::Read(uint64_t index, uint8_t* const* dst) {
  uint64_t local = 0;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<NativeDataset> d, Locate(index, &local));
  // (A shard closed meanwhile stays readable through `d`: an evicted file
  // is unlinked, not truncated.)
  if (local >= d->size())
    return Status::DataLoss(Describe() + ": a shard holds fewer samples than the index says (sample " +
                            std::to_string(local) + " of it is missing)");
  return d->Read(local, dst);
}

Status StreamReader::SampleBytes(uint64_t index, uint64_t* bytes) {
  uint64_t local = 0;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<NativeDataset> d, Locate(index, &local));
  if (local >= d->size()) return Read(index, nullptr);  // (the same error)
  return d->SampleBytes(local, bytes);
}

}  // namespace stoker
