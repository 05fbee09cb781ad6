#include "cache/shard_cache.h"

#include "cache/lock_fd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "io/crc32c.h"

namespace stoker {

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// flock that retries on EINTR.
int Flock(int fd, int op) {
  int r;
  do {
    r = flock(fd, op);
  } while (r != 0 && errno == EINTR);
  return r;
}

Result<LockFd> LockFile(const std::string& path, int op) {
  LockFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return Status::IOError("open " + path, errno);
  if (Flock(fd.get(), op) != 0) return Status::IOError("flock " + path, errno);
  return fd;
}

}  // namespace

Status ShardCrcMismatch(const ShardInfo& shard, const std::string& url, uint32_t crc) {
  char want[16], have[16];
  std::snprintf(want, sizeof want, "%08x", shard.crc32c);
  std::snprintf(have, sizeof have, "%08x", crc);
  return Status::DataLoss("shard " + shard.name + " from " + url + ": CRC-32C " + have + " does not match the index's " +
                          want + " (the shard on the store is corrupt, or the index is stale)");
}

Result<uint32_t> FileCrc32c(int fd, uint64_t size, const std::string& path) {
  std::vector<uint8_t> buf(1 << 20);
  uint32_t crc = 0;
  for (uint64_t at = 0; at < size;) {
    const ssize_t n = pread(fd, buf.data(), std::min<uint64_t>(buf.size(), size - at), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IOError("read " + path, n < 0 ? errno : EIO);
    crc = Crc32cExtend(crc, buf.data(), static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  return crc;
}

bool IsPlainShardName(const std::string& n) {
  return !n.empty() && n.find('/') == std::string::npos && n != "." && n != ".." && n[0] != '.' &&
         !EndsWith(n, ".part") && !EndsWith(n, ".lock") && !EndsWith(n, ".reserve");
}

namespace {

// Whether the process downloading shard `base` is alive: it holds the
// shard's lock file.  (One that died left its lock free.)
bool DownloaderAlive(const std::string& lock_path) {
  LockFd lfd(open(lock_path.c_str(), O_RDONLY | O_CLOEXEC));
  return lfd.valid() && Flock(lfd.get(), LOCK_EX | LOCK_NB) != 0;
}

}  // namespace

const std::string& ShardCache::BootId() {
  static const std::string id = [] {
    std::string v;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
      char buf[64] = {0};
      if (std::fgets(buf, sizeof buf, f)) v = buf;
      std::fclose(f);
    }
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
    return v;
  }();
  return id;
}

Result<bool> ShardCache::Intact(int fd, const ShardInfo& shard, const std::string& path) {
  char stamp[128] = {0};
  const ssize_t n = fgetxattr(fd, kStampAttr, stamp, sizeof stamp - 1);
  if (n <= 0) return true;  // fsynced (durable, or a file system without attributes), or copied in
  unsigned crc = 0;
  char boot[80] = {0};
  if (std::sscanf(stamp, "%8x %79s", &crc, boot) != 2) return true;
  if (BootId().empty() || BootId() == boot) return true;  // written in this boot: the page cache has it
  // Written before a reboot without an fsync: a power cut may have torn it.
  ++verified_;
  STOKER_ASSIGN_OR_RETURN(uint32_t have, FileCrc32c(fd, shard.size, path));
  if (have != crc || (shard.has_crc && have != shard.crc32c)) {
    ++torn_;
    return false;
  }
  // Whole, and on the disk (it outlived the boot): this boot's stamp.
  const std::string renewed = std::string(stamp, 8) + " " + BootId();
  fsetxattr(fd, kStampAttr, renewed.data(), renewed.size(), 0);
  return true;
}

Result<std::unique_ptr<ShardCache>> ShardCache::Open(const std::string& dir, uint64_t max_bytes, EvictionOrder order,
                                                     const std::vector<ShardInfo>& shards, bool durable) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::IOError("mkdir " + dir, errno);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument("ShardCache: " + dir + " is not a directory");
  std::unique_ptr<ShardCache> c(new ShardCache(dir, max_bytes, order, durable));
  const std::string idx = c->index_dir();
  // (A cache has its index directory, or its lock file from before there was one.)
  if (stat(idx.c_str(), &st) != 0 && stat((dir + "/.stoker-cache.lock").c_str(), &st) != 0) {
    // Not a cache yet: is everything in it ours to evict?
    // (The cache's own names too: another process may be making it a cache
    // right now, e.g. another rank opening the same directory.)
    std::set<std::string> known{".", "..", kIndexDir, ".stoker-cache.lock"};
    for (const ShardInfo& s : shards)
      for (const char* suffix : {"", ".part", ".lock", ".reserve"}) known.insert(s.name + suffix);
    std::string other;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (!known.count(e->d_name)) {
          other = e->d_name;
          break;
        }
      closedir(d);
    }
    if (!other.empty())
      return Status::InvalidArgument("cache directory " + dir + " holds " + other +
                                     ", which is not one of the dataset's shards, and is not a stoker cache (no " +
                                     kIndexDir + "): the cache counts every file in its directory against "
                                     "max_bytes and evicts them; give it an empty or new directory of its own");
  }
  if (mkdir(idx.c_str(), 0755) != 0 && errno != EEXIST) return Status::IOError("mkdir " + idx, errno);
  c->SweepIndexes();
  return c;
}

namespace {

// The shard a record index file belongs to (<name>.<hash>.stoker-index), or
// false for anything else.
bool IndexedShard(const std::string& file, std::string* shard) {
  constexpr size_t kSuffix = std::char_traits<char>::length(".stoker-index");
  if (file[0] == '.' || file.size() <= kSuffix + 1) return false;
  const size_t cut = file.rfind('.', file.size() - kSuffix - 1);
  if (cut == std::string::npos) return false;
  *shard = file.substr(0, cut);
  return true;
}

}  // namespace

void ShardCache::RemoveIndexesIf(const std::function<bool(const std::string& shard)>& gone) const {
  const std::string idx = index_dir();
  DIR* d = opendir(idx.c_str());
  if (!d) return;
  std::string shard;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (IndexedShard(n, &shard) && gone(shard)) unlink((idx + "/" + n).c_str());
  }
  closedir(d);
}

void ShardCache::SweepIndexes() const {
  RemoveIndexesIf([this](const std::string& shard) {
    struct stat st {};
    return stat(Path(shard).c_str(), &st) != 0 && errno == ENOENT;
  });
}

void ShardCache::DropIndexes(const std::set<std::string>& evicted) const {
  RemoveIndexesIf([&](const std::string& shard) { return evicted.count(shard) > 0; });
}

bool ShardCache::IsCached(const ShardInfo& shard) const {
  struct stat st {};
  return stat(Path(shard.name).c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == shard.size;
}

Result<ShardCache::Usage> ShardCache::Scan(Candidates* candidates, const std::string& own) const {
  DIR* d = opendir(dir_.c_str());
  if (!d) return Status::IOError("opendir " + dir_, errno);
  Usage u;
  std::vector<std::pair<std::string, uint64_t>> parts;
  std::map<std::string, uint64_t> reserved;
  std::map<std::string, uint64_t> complete;  // shards: a reservation whose shard is in, and no part, is done
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n[0] == '.' || EndsWith(n, ".lock")) continue;
    struct stat st {};
    if (stat(Path(n).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // evicted meanwhile
    if (EndsWith(n, ".part")) {
      parts.emplace_back(n.substr(0, n.size() - 5), static_cast<uint64_t>(st.st_size));
      // A dead process's part goes first.
      if (candidates && n != own + ".part" && !DownloaderAlive(Path(parts.back().first) + ".lock"))
        candidates->emplace_back(0, n);
    } else if (EndsWith(n, ".reserve")) {
      // A reservation counts while its downloader lives (holds the shard's
      // lock); one left by a crashed process is dropped.
      const std::string base = n.substr(0, n.size() - 8);
      if (!DownloaderAlive(Path(base) + ".lock")) {
        unlink(Path(n).c_str());
        continue;
      }
      char buf[32] = {0};
      UniqueFd fd(open(Path(n).c_str(), O_RDONLY | O_CLOEXEC));
      const uint64_t bytes =
          fd.valid() && read(fd.get(), buf, sizeof buf - 1) > 0 ? std::strtoull(buf, nullptr, 10) : 0;
      u.used += bytes;
      reserved[base] = bytes;
    } else {
      u.used += static_cast<uint64_t>(st.st_size);
      complete[n] = static_cast<uint64_t>(st.st_size);
      if (candidates && IsPlainShardName(n)) {
        // Least recently used first (atime, set when a shard is pinned and
        // when a reader is done with it), or oldest first (mtime: written).
        const timespec t = order_ == EvictionOrder::kOldest ? st.st_mtim : st.st_atim;
        candidates->emplace_back(t.tv_sec * 1000000000LL + t.tv_nsec, n);
      }
    }
  }
  closedir(d);
  // A part being downloaded is inside its reservation (the rest of which is
  // still to be written); one a dead process left counts for its size.
  std::set<std::string> with_part;
  for (const auto& [base, bytes] : parts) {
    with_part.insert(base);
    auto r = reserved.find(base);
    if (r == reserved.end()) {
      u.used += bytes;
    } else {
      r->second -= std::min(r->second, bytes);
    }
  }
  // A download between renaming its part and removing its reservation: the
  // shard counted above, its reservation not again.  (A file of another size
  // under the name is what the download replaces: the reservation counts.)
  for (auto& [base, left] : reserved) {
    auto c = complete.find(base);
    if (!with_part.count(base) && c != complete.end() && c->second == left) {
      u.used -= std::min(u.used, left);
      left = 0;
    }
  }
  for (const auto& [base, left] : reserved) u.unwritten += left;
  return u;
}

Result<LockFd> ShardCache::LockDirectory(int op) const { return LockFile(Path(".stoker-cache.lock"), op); }

Result<uint64_t> ShardCache::UsedBytes() const {
  STOKER_ASSIGN_OR_RETURN(LockFd dirlock, LockDirectory(LOCK_SH));
  STOKER_ASSIGN_OR_RETURN(Usage u, Scan());
  return u.used;
}

std::vector<uint32_t> ShardCache::CachedAmong(const std::vector<ShardInfo>& shards) const {
  Result<LockFd> dirlock = LockDirectory(LOCK_SH);  // (held to the end when had)
  // One listing, then a stat (for the size) only of the shards present: a
  // remote dataset of many shards, a few of them cached, costs a stat per
  // cached shard instead of one per remote shard.
  std::unordered_set<std::string> present;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') present.emplace(e->d_name);
    closedir(d);
  }
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < shards.size(); ++i)
    if (present.count(shards[i].name) && IsCached(shards[i])) out.push_back(i);
  return out;
}

uint64_t ShardCache::KeepFree(uint64_t file_system_bytes) {
  return std::min<uint64_t>(uint64_t{1} << 30, file_system_bytes / 20);
}

Result<uint64_t> ShardCache::DiskRoom(const Usage& u) const {
  struct statvfs fs {};
  if (statvfs(dir_.c_str(), &fs) != 0) return Status::IOError("statvfs " + dir_, errno);
  const uint64_t avail = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const uint64_t taken = u.unwritten + KeepFree(static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize);
  return avail > taken ? avail - taken : 0;
}

bool ShardCache::HasRoomFor(const ShardInfo& shard) const {
  if (shard.size > max_bytes_) return false;  // (max_bytes=0: every shard, without a scan)
  Result<Usage> u = Scan();
  if (!u.ok() || u.value().used + shard.size > max_bytes_) return false;
  Result<uint64_t> disk = DiskRoom(u.value());
  return disk.ok() && disk.value() >= shard.size;
}

Status ShardCache::Reserve(const ShardInfo& shard, bool may_evict) {
  if (shard.size > max_bytes_)
    return Status::ResourceExhausted("shard " + shard.name + " (" + std::to_string(shard.size) +
                                     " bytes) is larger than the cache's max_bytes (" + std::to_string(max_bytes_) +
                                     ")");
  STOKER_ASSIGN_OR_RETURN(LockFd dirlock, LockDirectory(LOCK_EX));
  Candidates cand;
  STOKER_ASSIGN_OR_RETURN(Usage usage, Scan(&cand, shard.name));
  uint64_t used = usage.used;
  STOKER_ASSIGN_OR_RETURN(uint64_t disk, DiskRoom(usage));
  // What this download still has to write (a part left by an earlier
  // attempt is resumed).
  struct stat own {};
  const uint64_t need =
      shard.size - std::min<uint64_t>(shard.size, stat((Path(shard.name) + ".part").c_str(), &own) == 0
                                                      ? static_cast<uint64_t>(own.st_size) : 0);
  auto fits = [&] { return used + shard.size <= max_bytes_ && disk >= need; };
  if (!fits() && !may_evict)
    return Status::ResourceExhausted("cache " + dir_ + " has no room for shard " + shard.name +
                                     " without evicting (" + std::to_string(used) + " of max_bytes=" +
                                     std::to_string(max_bytes_) + " bytes used, " + std::to_string(disk) +
                                     " bytes of room on the disk)");
  if (!fits()) {
    std::sort(cand.begin(), cand.end());  // (the scan's candidates: dead parts, then by last use or age)
    // Pick the victims (locked: no reader pins them meanwhile) and evict
    // them only if that makes room: a disk full of other files must not
    // empty the cache for nothing.
    std::vector<std::pair<std::string, LockFd>> victims;
    for (const auto& [atime, n] : cand) {
      if (fits()) break;
      LockFd fd(open(Path(n).c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) continue;
      if (Flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // pinned by a reader: never evicted
      struct stat st {};
      if (fstat(fd.get(), &st) != 0 || st.st_nlink == 0) continue;
      used -= std::min<uint64_t>(used, static_cast<uint64_t>(st.st_size));
      disk += static_cast<uint64_t>(st.st_blocks) * 512;  // freed once the descriptor closes
      victims.emplace_back(n, std::move(fd));
    }
    if (used + shard.size > max_bytes_)
      return Status::ResourceExhausted("cache " + dir_ + " is full: " + std::to_string(used) + " of " +
                                       std::to_string(max_bytes_) + " bytes are shards in use or being downloaded, " +
                                       "and shard " + shard.name + " needs " + std::to_string(shard.size));
    if (disk < need)
      return Status::ResourceExhausted(
          "cache " + dir_ + ": its file system has room for " + std::to_string(disk) + " more bytes (keeping " +
          "min(1 GiB, 5% of it) free for everything else), counting every cached shard not in use as evicted, "
          "and shard " + shard.name + " needs " + std::to_string(need) + ". max_bytes=" + std::to_string(max_bytes_) +
          " is more than that disk holds now: free space there or lower max_bytes");
    std::set<std::string> evicted;
    for (const auto& [n, fd] : victims)
      if (unlink(Path(n).c_str()) == 0 && !EndsWith(n, ".part")) {
        ++evictions_;
        evicted.insert(n);
      }
    victims.clear();  // (closed: their space is free)
    if (!evicted.empty()) DropIndexes(evicted);
  }
  const std::string reserve = Path(shard.name) + ".reserve";
  UniqueFd fd(open(reserve.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return Status::IOError("create " + reserve, errno);
  const std::string n = std::to_string(shard.size);
  if (write(fd.get(), n.data(), n.size()) != static_cast<ssize_t>(n.size())) return Status::IOError("write " + reserve, errno);
  return Status::OK();
}

Status ShardCache::Download(Store& store, const ShardInfo& shard, Pin* pin) {
  const std::string path = Path(shard.name), part = path + ".part";
  for (int attempt = 0; attempt < 2; ++attempt) {
    LockFd fd(open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));  // (pinned before its rename)
    if (!fd.valid()) return Status::IOError("create " + part, errno);
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) return Status::IOError("fstat " + part, errno);
    uint64_t have = static_cast<uint64_t>(st.st_size);
    if (have > shard.size) {  // not a prefix of this shard
      if (ftruncate(fd.get(), 0) != 0) return Status::IOError("truncate " + part, errno);
      have = 0;
    }
    const bool resumed = have > 0;
    uint64_t got = 0;
    const uint64_t before = store.bytes_received();
    // The CRC of a resumed part's bytes, then of the rest as it arrives,
    // where something checks it: the index's, or the stamp (not durable).
    const bool want_crc = shard.has_crc || !durable_;
    uint32_t crc = 0;
    if (want_crc && resumed) {
      STOKER_ASSIGN_OR_RETURN(crc, FileCrc32c(fd.get(), have, part));
    }
    Status s = store.Download(shard.name, fd.get(), shard.size, &got, want_crc ? &crc : nullptr);
    bytes_downloaded_ += store.bytes_received() - before;
    if (!s.ok()) return Status::FromCode(s.code(), "shard " + shard.name + ": " + s.message());
    if (shard.has_crc) {
      if (crc != shard.crc32c) {
        unlink(part.c_str());
        if (resumed) continue;  // a crash may have left bad bytes in the part: once more from scratch
        return ShardCrcMismatch(shard, store.Locate(shard.name), crc);
      }
    }
    // Stamped before its rename (a journal that keeps the rename keeps the
    // attribute set before it), or fsynced.
    char stamp[128];
    const int len = std::snprintf(stamp, sizeof stamp, "%08x %s", crc, BootId().c_str());
    const bool stamped = !durable_ && !BootId().empty() && fsetxattr(fd.get(), kStampAttr, stamp, len, 0) == 0;
    if (!stamped && fsync(fd.get()) != 0) return Status::IOError("fsync " + part, errno);
    // Pinned before it gets its name, so no evictor can take it between the
    // rename and the caller's first read (the lock belongs to the inode).
    if (Flock(fd.get(), LOCK_SH) != 0) return Status::IOError("flock " + part, errno);
    {
      // Renamed and its reservation dropped under the directory lock: a
      // look at the directory (Reserve, UsedBytes) sees the download before
      // or after, never half (a listing that missed both names could count
      // one shard too few, and the cache end one over max_bytes).
      STOKER_ASSIGN_OR_RETURN(LockFd dirlock, LockDirectory(LOCK_EX));
      if (rename(part.c_str(), path.c_str()) != 0) return Status::IOError("rename " + part, errno);
      unlink((path + ".reserve").c_str());
    }
    if (!stamped) {
      UniqueFd d(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (d.valid()) fsync(d.get());
    }
    ++downloads_;
    pin->fd_ = std::move(fd);
    pin->path_ = path;
    pin->downloaded_ = true;
    return Status::OK();
  }
  return Status::Internal("unreachable");
}

void ShardCache::MarkUsed(const Pin& pin) {
  if (!pin.valid()) return;
  const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  futimens(pin.fd_.get(), times);
}

Result<ShardCache::Pin> ShardCache::PinCached(const ShardInfo& shard) {
  Pin p;
  p.path_ = Path(shard.name);
  const int fd = open(p.path_.c_str(), O_RDONLY | O_CLOEXEC);
  const int err = errno;
  p.fd_.reset(fd);
  if (fd < 0 && err != ENOENT) return Status::IOError("open " + p.path_, err);  // (EMFILE, EACCES, ...)
  if (!p.fd_.valid()) return Status::InvalidArgument("shard " + shard.name + " is not in the cache " + dir_);
  if (Flock(p.fd_.get(), LOCK_SH) != 0) return Status::IOError("flock " + p.path_, errno);
  struct stat st {};
  if (fstat(p.fd_.get(), &st) != 0 || st.st_nlink == 0 || static_cast<uint64_t>(st.st_size) != shard.size)
    return Status::InvalidArgument("shard " + shard.name + " is not in the cache " + dir_ + " (evicted)");
  STOKER_ASSIGN_OR_RETURN(bool intact, Intact(p.fd_.get(), shard, p.path_));
  if (!intact) {
    // Torn by a power cut: gone, for whoever fetches it next (Fetch, under
    // the shard's download lock) to download again.
    unlink(p.path_.c_str());
    return Status::InvalidArgument("shard " + shard.name + " in the cache " + dir_ +
                                   " was torn by an unclean stop (its CRC-32C does not match its stamp): dropped");
  }
  MarkUsed(p);  // atime: recently used
  return p;
}

Result<ShardCache::Pin> ShardCache::Fetch(Store& store, const ShardInfo& shard, bool may_evict) {
  if (!IsPlainShardName(shard.name)) return Status::InvalidArgument("shard name '" + shard.name + "' must be a plain file name");
  Result<Pin> hit = PinCached(shard);
  if (hit.ok()) {
    ++hits_;
    return hit;
  }
  // One downloader per shard, across processes: the others wait here.
  STOKER_ASSIGN_OR_RETURN(LockFd lock, LockFile(Path(shard.name) + ".lock", LOCK_EX));
  hit = PinCached(shard);
  if (hit.ok()) {  // someone else downloaded it meanwhile
    ++hits_;
    return hit;
  }
  STOKER_RETURN_IF_ERROR(Reserve(shard, may_evict));
  Pin pin;
  Status st = Download(store, shard, &pin);
  unlink((Path(shard.name) + ".reserve").c_str());
  if (!st.ok()) return st;
  return pin;
}

}  // namespace stoker
