// ShardCache: a local directory of whole shards fetched from a Store, under
// a byte budget, safe to share between threads and processes (the ranks of
// one node):
//   - a shard is downloaded to <name>.part (resumed if a crash left one),
//     checked (size, and CRC-32C when the index has one) and renamed into
//     place: a reader never sees half a shard;
//   - it is not fsynced (durable = false, the default): a cache can be
//     fetched again, and only a kernel crash or a power cut loses written
//     pages, which a reboot tells.  Instead each shard carries a stamp (an
//     extended attribute: its CRC-32C and the boot it was written in); the
//     first process to use it in a later boot reads it through once and
//     checks the CRC, and a shard a power cut tore is dropped and fetched
//     again.  Where the file system keeps no extended attributes, and with
//     durable = true, each shard is fsynced (with its directory) as before;
//   - one process downloads a shard, the others wait on its lock file and
//     then find it (no double download);
//   - before a download, shards are evicted (least recently used, or oldest
//     downloaded first) until the cached and in-progress bytes plus the new
//     shard fit max_bytes, and the shard fits the disk's free space (less
//     KeepFree); a shard a reader has pinned (shared flock) is never
//     evicted.  A .part left by a process that died counts against
//     max_bytes until it is resumed or evicted (oldest first).
// Layout of the directory: <name> (complete), <name>.part (downloading),
// <name>.reserve (bytes reserved for a download), <name>.lock, .stoker-cache.lock,
// and .stoker-index/<name>.<hash>.stoker-index (a cached TFRecord shard's
// record index, written by its reader; removed with the shard).
#ifndef STOKER_CACHE_SHARD_CACHE_H_
#define STOKER_CACHE_SHARD_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cache/lock_fd.h"
#include "core/unique_fd.h"
#include "stoker/shard_index.h"
#include "stoker/store.h"
#include "stoker/eviction_order.h"

namespace stoker {

// A shard name that is a plain file name and none of the cache's own.
bool IsPlainShardName(const std::string& name);
// DataLoss naming the shard, where it came from, its CRC-32C and the index's.
Status ShardCrcMismatch(const ShardInfo& shard, const std::string& url, uint32_t crc);
// CRC-32C of the first `size` bytes of `fd` (`path` for messages).
Result<uint32_t> FileCrc32c(int fd, uint64_t size, const std::string& path);

class ShardCache {
 public:
  // max_bytes 0: a cache that takes no new shard (Fetch serves those the
  // directory holds already).  The cache counts and evicts every file in its
  // directory, so a directory that is not a cache yet (no kIndexDir, no
  // .stoker-cache.lock) may hold only the shards named in `shards` (copied
  // there beforehand, or left by a crash: with .part/.lock/.reserve);
  // anything else is refused.
  static Result<std::unique_ptr<ShardCache>> Open(const std::string& dir, uint64_t max_bytes,
                                                  EvictionOrder order = EvictionOrder::kLeastRecentlyUsed,
                                                  const std::vector<ShardInfo>& shards = {}, bool durable = false);

  // A shard held by a reader: never evicted while the Pin lives.
  class Pin {
   public:
    Pin() = default;
    const std::string& path() const { return path_; }
    bool valid() const { return fd_.valid(); }
    // Downloaded (and checked against the index) by this Fetch, not a hit.
    bool downloaded() const { return downloaded_; }

   private:
    friend class ShardCache;
    LockFd fd_;  // (shared flock: pinned)
    std::string path_;
    bool downloaded_ = false;
  };

  // The shard, downloaded from `store` first unless it is cached, pinned.
  // may_evict false: ResourceExhausted instead of evicting when the shard
  // does not fit as things are (decided under the directory lock).
  Result<Pin> Fetch(Store& store, const ShardInfo& shard, bool may_evict = true);
  // Pins a cached shard; NotFound-like InvalidArgument when it is not cached.
  Result<Pin> PinCached(const ShardInfo& shard);
  bool IsCached(const ShardInfo& shard) const;
  // Marks the pinned shard as used now (least-recently-used eviction).
  static void MarkUsed(const Pin& pin);
  // Bytes of complete shards plus reservations of downloads in progress,
  // at one moment (under the directory lock, shared: no eviction, no
  // download renamed into place meanwhile).
  Result<uint64_t> UsedBytes() const;
  // Which of `shards` (their positions) are complete in the cache, at one
  // moment as UsedBytes (shard by shard where the lock cannot be had).
  std::vector<uint32_t> CachedAmong(const std::vector<ShardInfo>& shards) const;
  // Whether `shard` could be downloaded now without evicting anything: it
  // fits max_bytes and the file system under the directory has room for it
  // (DiskRoom).
  bool HasRoomFor(const ShardInfo& shard) const;
  // Free space the cache leaves on its file system for everything else:
  // min(1 GiB, 5% of the file system).  A max_bytes larger than the disk
  // holds makes the cache evict when the disk is full to this point, as it
  // does at max_bytes.
  static uint64_t KeepFree(uint64_t file_system_bytes);

  // The directory's record indexes (kept out of the byte count; small).
  static constexpr const char* kIndexDir = ".stoker-index";
  std::string index_dir() const { return Path(kIndexDir); }
  // Removes the record indexes of shards no longer in the directory.
  void SweepIndexes() const;
  // Removes the record indexes of the `evicted` shards (a listing of the
  // index directory, no stat per file).
  void DropIndexes(const std::set<std::string>& evicted) const;
  // Removes the record indexes of the shards `gone` says yes to.
  void RemoveIndexesIf(const std::function<bool(const std::string& shard)>& gone) const;

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t downloads() const { return downloads_; }
  uint64_t hits() const { return hits_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t bytes_downloaded() const { return bytes_downloaded_; }
  // Shards checked after an unclean stop (a stamp from another boot), and
  // of those the torn ones (dropped, fetched again).
  uint64_t verified() const { return verified_; }
  uint64_t torn() const { return torn_; }

  // The stamp's extended attribute, and this boot's id
  // (/proc/sys/kernel/random/boot_id).
  static constexpr const char* kStampAttr = "user.stoker.shard";
  static const std::string& BootId();

 private:
  ShardCache(std::string dir, uint64_t max_bytes, EvictionOrder order, bool durable)
      : dir_(std::move(dir)), max_bytes_(max_bytes), order_(order), durable_(durable) {}
  // Whether the pinned shard at `fd` is whole: true without a look unless
  // its stamp is from another boot, then its CRC-32C is checked (and the
  // stamp renewed).  False: torn.
  Result<bool> Intact(int fd, const ShardInfo& shard, const std::string& path);
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The directory lock (.stoker-cache.lock): exclusive to evict, reserve
  // and rename a download into place; shared to look (UsedBytes).
  Result<LockFd> LockDirectory(int op) const;
  // The directory by UsedBytes's rules; `unwritten`: bytes that live
  // downloads have reserved and not written yet (still free on the disk).
  struct Usage {
    uint64_t used = 0, unwritten = 0;
  };
  // Files eviction may take, with the time that orders them: complete
  // shards (by mtime for oldest first, atime for least recently used) and
  // the parts of dead downloaders (0: first).
  using Candidates = std::vector<std::pair<int64_t, std::string>>;
  // One pass over the directory (a stat per file): its usage, and with
  // `candidates` the files eviction may take, but not `own`'s part.
  Result<Usage> Scan(Candidates* candidates = nullptr, const std::string& own = "") const;
  // Bytes the file system can take for new shards: its free space less
  // `unwritten` and KeepFree.
  Result<uint64_t> DiskRoom(const Usage& u) const;
  // Under the directory lock: evicts until the shard fits max_bytes and the
  // disk (DiskRoom), if evicting can make it fit; reserves its bytes.
  Status Reserve(const ShardInfo& shard, bool may_evict);
  // Downloads, checks and renames into place; *pin holds it from before the rename.
  Status Download(Store& store, const ShardInfo& shard, Pin* pin);
  std::string dir_;
  uint64_t max_bytes_;
  EvictionOrder order_;
  bool durable_;
  std::atomic<uint64_t> downloads_{0}, hits_{0}, evictions_{0}, bytes_downloaded_{0}, verified_{0}, torn_{0};
};

}  // namespace stoker

#endif  // STOKER_CACHE_SHARD_CACHE_H_
