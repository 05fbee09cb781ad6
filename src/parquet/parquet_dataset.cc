#include "stoker/parquet_dataset.h"

#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>

#include "core/trace.h"
#include "parquet/decode_pool.h"
#include "parquet/page_cache.h"
#include "parquet/page_decoder.h"
#include "parquet/parquet_columns.h"
#include "parquet/row_group_cache.h"
#include "parquet/store_file.h"

namespace stoker {

namespace {

Status FromArrow(const arrow::Status& st, const std::string& where) {
  return st.ok() ? Status::OK() : Status::DataLoss(where + ": " + st.message());
}

// The leaf columns (Parquet's column indices) under a field of the schema.
void Leaves(const parquet::arrow::SchemaField& f, std::vector<int>* out) {
  if (f.column_index >= 0) out->push_back(f.column_index);
  for (const auto& c : f.children) Leaves(c, out);
}

struct File {
  std::string path;
  std::shared_ptr<parquet::FileMetaData> meta;
  std::vector<int> leaves;  // of the requested columns, ascending
  std::mutex mu;
  std::vector<std::unique_ptr<parquet::arrow::FileReader>> idle;  // opened, not in use
  // A global shuffle's (window 0): each requested column's page decoder and
  // pages (per row group of the file), and the file, opened when first read.
  std::vector<std::shared_ptr<PageDecoder>> decoders;
  std::vector<std::vector<ColumnPages>> pages;
  std::shared_ptr<arrow::io::RandomAccessFile> source;
};

// A row group is decoded as chunks of kChunkRows rows (the last one
// shorter), each column's values in a buffer of their own.  Decoded whole,
// a string or binary column's values buffer grows by doubling as its pages
// are decoded: each growth copies it into fresh memory, which the kernel
// zeroes first, about 15% of a shuffled epoch's CPU time at issue 51's
// size.  Chunks of this size are sized about right from the start.
constexpr int64_t kChunkRows = 2048;

// Decoding in the calling thread, a column chunk at a time: no thread of
// Arrow's pools (pre-buffering would start its I/O pool's), the reader
// threads are the parallelism.
parquet::ArrowReaderProperties ReaderProperties() {
  parquet::ArrowReaderProperties p;
  p.set_use_threads(false);
  p.set_pre_buffer(false);
  p.set_batch_size(kChunkRows);
  return p;
}

// Whether every column of t is in chunks of kChunkRows rows (the last one
// shorter), as a row group read in batches is; row r is then row
// r % kChunkRows of chunk r / kChunkRows.
bool InChunks(const arrow::Table& t) {
  for (const auto& col : t.columns()) {
    const int n = col->num_chunks();  // (none: a row group of no rows)
    for (int k = 0; k < n; ++k) {
      const int64_t rows = col->chunk(k)->length();
      if (k + 1 < n ? rows != kChunkRows : rows > kChunkRows || (rows == 0 && n > 1)) return false;
    }
  }
  return true;
}

// Row `row` of column c of a decoded row group: its chunk, and its row in it.
inline const arrow::Array& RowChunk(const arrow::Table& t, int c, int64_t row, int64_t* at) {
  *at = row % kChunkRows;
  return *t.column(c)->chunk(static_cast<int>(row / kChunkRows));
}

// A local file, or a remote one read by range requests.
Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenSource(const std::string& path, const StoreOptions& store,
                                                                const std::shared_ptr<FetchCounters>& counters) {
  if (IsRemotePath(path)) {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<StoreFile> f, StoreFile::Open(path, store, counters));
    return std::shared_ptr<arrow::io::RandomAccessFile>(std::move(f));
  }
  auto file = arrow::io::ReadableFile::Open(path);
  if (!file.ok()) return Status::IOError(path + ": " + file.status().message());
  return std::shared_ptr<arrow::io::RandomAccessFile>(*file);
}

// A reader of `file`: the footer is parsed already (meta), so this opens
// the file and nothing more.  It decodes into `pool`.
Result<std::unique_ptr<parquet::arrow::FileReader>> OpenReader(const std::string& path,
                                                               std::shared_ptr<parquet::FileMetaData> meta,
                                                               const StoreOptions& store,
                                                               const std::shared_ptr<FetchCounters>& counters,
                                                               arrow::MemoryPool* pool) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<arrow::io::RandomAccessFile> file, OpenSource(path, store, counters));
  try {
    auto pq = parquet::ParquetFileReader::Open(file, parquet::default_reader_properties(), std::move(meta));
    auto r = parquet::arrow::FileReader::Make(pool, std::move(pq), ReaderProperties());
    if (!r.ok()) return Status::DataLoss(path + ": " + r.status().message());
    return std::move(r).MoveValueUnsafe();
  } catch (const std::exception& e) {
    return Status::DataLoss(path + ": " + e.what() + " (a truncated or damaged Parquet file?)");
  }
}

// The paths with each "s3://bucket/prefix/" (a trailing slash) replaced by
// the .parquet objects under it, in name order.
Result<std::vector<std::string>> ListRemote(const std::vector<std::string>& paths, const StoreOptions& options) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (!IsRemotePath(p) || p.back() != '/') {
      out.push_back(p);
      continue;
    }
    const std::string root = p.substr(0, p.size() - 1);
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(root, options));
    Result<std::vector<StoreObject>> listed = store->List();
    if (!listed.ok())
      return Status::FromCode(listed.status().code(), "ParquetDataset: " + p + " cannot be listed (" + listed.status().message() +
                                                "): name its files");
    std::vector<std::string> names;
    for (const StoreObject& o : *listed)
      if (o.name.size() > 8 && o.name.compare(o.name.size() - 8, 8, ".parquet") == 0) names.push_back(o.name);
    std::sort(names.begin(), names.end());
    if (names.empty()) return Status::InvalidArgument("ParquetDataset: no .parquet object under " + p);
    for (const std::string& n : names) out.push_back(root + "/" + n);
  }
  return out;
}

}  // namespace

struct ParquetDataset::Impl {
  // The pool row groups are decoded into (decode_pool.h; what it keeps is
  // set in Open).  First: it goes last, after every decoded buffer.
  struct Pool {
    DecodePool* p = new DecodePool(0);
    ~Pool() { p->Close(); }
  } pool;
  int trace_source = 0;
  ParquetOptions o;
  std::vector<std::unique_ptr<File>> files;
  std::vector<std::string> names;          // requested columns
  std::vector<ParquetColumn> columns;
  std::vector<int> field_of, mask_of;      // per column: its field, its ".valid" field (-1: none)
  std::vector<FieldSpec> fields;
  std::vector<std::pair<uint64_t, uint64_t>> groups;  // {first row, rows}
  std::vector<uint32_t> group_file, group_local;
  std::vector<uint64_t> estimates;         // decoded bytes of each row group (uncompressed size)
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> reads;  // rows read of each row group
  // The epoch is shuffled: a batch's rows are copied out as their sizes
  // are read (Staged, below).  In order, a batch spans a row group or two
  // and the second copy would only cost.
  std::atomic<bool> stage_rows{false};
  // A global shuffle (window 0): rows are read through their pages
  // (page_cache), but in an epoch in order, through their row groups.
  std::unique_ptr<PageCache> pages;
  std::atomic<bool> by_pages{false};
  uint64_t rows = 0;
  std::unique_ptr<RowGroupCache> cache;
  std::shared_ptr<FetchCounters> fetched = std::make_shared<FetchCounters>();
  static constexpr uint64_t kIdleReaders = 64;
  std::atomic<uint64_t> idle_readers{0};  // readers kept open, over every file

  // The cache's decoder ahead stops before the members its decodes use go.
  ~Impl() { cache.reset(); }

  uint32_t GroupOf(uint64_t index) const {
    auto it = std::upper_bound(groups.begin(), groups.end(), index,
                               [](uint64_t i, const std::pair<uint64_t, uint64_t>& g) { return i < g.first; });
    return static_cast<uint32_t>(it - groups.begin() - 1);
  }

  // Row `index`: its row group g, its row there and the decoded row group.
  Result<RowGroupCache::Table> Locate(const ParquetDataset& self, uint64_t index, uint32_t* g, int64_t* row) {
    if (index >= rows) return Status::InvalidArgument(self.Describe() + ": no row " + std::to_string(index));
    *g = GroupOf(index);
    *row = static_cast<int64_t>(index - groups[*g].first);
    return cache->Get(*g);
  }

  Status CopyRow(const arrow::Table& t, uint32_t g, int64_t row, uint8_t* const* dst) const;
  // Column c's value of row `row` of g, at `at` of `a` (its row group's
  // decode, or its page's), to its field (and its mask's).
  Status CopyColumn(size_t c, const arrow::Array& a, int64_t at, uint32_t g, int64_t row, uint8_t* const* dst) const;
  // Row `index` through its pages: each column's page and the row's place
  // in it (a global shuffle).
  Status PageRow(const ParquetDataset& self, uint64_t index, uint32_t* g, std::vector<PageCache::Page>* page,
                 std::vector<int64_t>* at) {
    if (index >= rows) return Status::InvalidArgument(self.Describe() + ": no row " + std::to_string(index));
    *g = GroupOf(index);
    const int64_t row = static_cast<int64_t>(index - groups[*g].first);
    File& f = *files[group_file[*g]];
    {
      std::lock_guard<std::mutex> l(f.mu);
      if (!f.source) {
        STOKER_ASSIGN_OR_RETURN(f.source, OpenSource(f.path, o.store, fetched));
      }
    }
    page->resize(columns.size());
    at->resize(columns.size());
    const uint32_t local = group_local[*g];
    for (size_t c = 0; c < columns.size(); ++c) {
      const ColumnPages& cp = f.pages[c][local];
      const size_t k = cp.PageOf(row);
      const uint64_t key = (uint64_t{*g} << 32) | (uint64_t{c} << 20) | k;
      Result<PageCache::Page> got = pages->Get(key, [&]() -> Result<PageCache::Page> {
        StageScope decoding(Stage::kDecode);
        Result<std::shared_ptr<arrow::Array>> a = f.decoders[c]->Decode(*f.source, static_cast<int>(local), cp, k);
        if (!a.ok())
          return Status::FromCode(a.status().code(), Where(*g) + ", column '" + names[c] + "', page " +
                                                         std::to_string(k) + ": " + a.status().message());
        return *a;
      });
      if (!got.ok()) return got.status();
      (*page)[c] = *got;
      (*at)[c] = row - cp.first_row[k];
    }
    return Status::OK();
  }
  // A row of g was read: the last one of the epoch tells the cache.
  void CountRead(uint32_t g);

  std::string Where(uint32_t g) const {
    return files[group_file[g]]->path + ", row group " + std::to_string(group_local[g]);
  }

  Result<RowGroupCache::Table> Decode(uint32_t g) {
    File& f = *files[group_file[g]];
    std::unique_ptr<parquet::arrow::FileReader> r;
    {
      std::lock_guard<std::mutex> l(f.mu);
      if (!f.idle.empty()) {
        r = std::move(f.idle.back()), f.idle.pop_back();
        idle_readers.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    if (!r) {
      STOKER_ASSIGN_OR_RETURN(r, OpenReader(f.path, f.meta, o.store, fetched, pool.p));
    }
    std::shared_ptr<arrow::Table> t;
    Status st;
    try {
      auto batches = r->GetRecordBatchReader({static_cast<int>(group_local[g])}, f.leaves);
      auto got = batches.ok() ? (*batches)->ToTable() : batches.status();
      if (got.ok() && !InChunks(**got))  // (Arrow's batches are batch_size rows but the last: not expected)
        got = arrow::Status::Invalid("decoded in batches of other sizes than ", kChunkRows, " rows");
      if (got.ok()) t = *got;
      else st = FromArrow(got.status(), Where(g));
    } catch (const std::exception& e) {
      st = Status::DataLoss(Where(g) + ": " + e.what());
    }
    if (!st.ok()) {
      std::string why = st.message().substr(Where(g).size() + 2);
      for (char& ch : why) ch = ch == '\n' ? ' ' : ch;
      while (!why.empty() && why.back() == ' ') why.pop_back();
      return Status::DataLoss(Where(g) + NameTheColumn(*r, g) + ": " + why);
    }
    {
      // Kept open for the file's next row group: two per file, kIdleReaders
      // in all (an open file, or a remote store's connection, each).
      std::lock_guard<std::mutex> l(f.mu);
      if (f.idle.size() < 2 && idle_readers.fetch_add(1, std::memory_order_relaxed) < kIdleReaders) {
        f.idle.push_back(std::move(r));
      } else if (f.idle.size() < 2) {
        idle_readers.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    return RowGroupCache::Table(std::move(t));
  }

  // ", column 'x'": the first requested column whose chunk in g does not
  // decode alone ("" if each does).
  std::string NameTheColumn(parquet::arrow::FileReader& r, uint32_t g) {
    for (size_t c = 0; c < names.size(); ++c) {
      std::vector<int> leaves;
      const int k = FieldIndex(r, names[c]);
      if (k < 0) continue;
      Leaves(r.manifest().schema_fields[k], &leaves);
      try {
        if (!r.ReadRowGroup(static_cast<int>(group_local[g]), leaves).ok()) return ", column '" + names[c] + "'";
      } catch (const std::exception&) {
        return ", column '" + names[c] + "'";
      }
    }
    return "";
  }

  static int FieldIndex(parquet::arrow::FileReader& r, const std::string& name) {
    const auto& sf = r.manifest().schema_fields;
    for (size_t k = 0; k < sf.size(); ++k)
      if (sf[k].field->name() == name) return static_cast<int>(k);
    return -1;
  }
};

ParquetDataset::ParquetDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  // The trace's "parquet" counters (core/trace.h), sampled while a trace runs.
  impl_->trace_source = AddTraceCounterSource([this] {
    const ParquetStats s = stats();
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    TraceCounter("parquet", {{"decoded_bytes", d(s.decoded_bytes)}, {"row_groups_decoded", d(s.row_groups_decoded)},
                             {"evictions", d(s.evictions)}, {"requests", d(s.requests)},
                             {"bytes_fetched", d(s.bytes_fetched)}});
  });
}

ParquetDataset::~ParquetDataset() { RemoveTraceCounterSource(impl_->trace_source); }

Result<std::unique_ptr<ParquetDataset>> ParquetDataset::Open(const std::vector<std::string>& paths,
                                                             const ParquetOptions& o) {
  if (paths.empty()) return Status::InvalidArgument("ParquetDataset: no files");
  auto m = std::make_unique<Impl>();
  m->o = o;
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> files, ListRemote(paths, o.store));
  std::shared_ptr<arrow::Schema> first;
  for (const std::string& path : files) {
    auto f = std::make_unique<File>();
    f->path = path;
    std::unique_ptr<parquet::arrow::FileReader> r;
    Result<std::shared_ptr<arrow::io::RandomAccessFile>> source = OpenSource(path, o.store, m->fetched);
    if (!source.ok())
      return Status::FromCode(source.status().code(), "ParquetDataset: " + source.status().message());
    try {
      auto pq = parquet::ParquetFileReader::Open(*source);
      f->meta = pq->metadata();
      auto made = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), ReaderProperties());
      if (!made.ok()) return Status::DataLoss("ParquetDataset: " + path + ": " + made.status().message());
      r = std::move(made).MoveValueUnsafe();
    } catch (const std::exception& e) {
      return Status::DataLoss("ParquetDataset: " + path + ": " + e.what() + " (a truncated or damaged Parquet file?)");
    }
    std::shared_ptr<arrow::Schema> schema;
    STOKER_RETURN_IF_ERROR(FromArrow(r->GetSchema(&schema), "ParquetDataset: " + path));
    if (!first) {
      first = schema;
      m->names = o.columns;
      if (m->names.empty())
        for (const auto& fld : schema->fields()) m->names.push_back(fld->name());
      for (const std::string& name : m->names) {
        auto fld = schema->GetFieldByName(name);
        if (!fld)
          return Status::InvalidArgument("ParquetDataset: " + path + " has no column '" + name + "' (its columns: " +
                                         [&] { std::string s; for (auto& x : schema->field_names()) s += (s.empty() ? "" : ", ") + x; return s; }() + ")");
        STOKER_ASSIGN_OR_RETURN(ParquetColumn col, ParquetColumn::Make(name, fld->type()));
        m->field_of.push_back(static_cast<int>(m->fields.size()));
        m->fields.push_back(col.field());
        if (col.variable()) m->fields.back().layout = col.field().leaf == FieldLeaf::kTensor ? o.lists : o.strings;
        if (o.null_mask && fld->nullable()) {
          m->mask_of.push_back(static_cast<int>(m->fields.size()));
          m->fields.push_back(FieldSpec{name + ".valid", ElementType::kBool, {}, false});
        } else {
          m->mask_of.push_back(-1);
        }
        m->columns.push_back(std::move(col));
      }
    }
    for (const std::string& name : m->names) {
      auto want = first->GetFieldByName(name);
      auto have = schema->GetFieldByName(name);
      if (!have)
        return Status::InvalidArgument("ParquetDataset: " + path + " has no column '" + name + "', which " +
                                       files[0] + " has; every file must have the columns read");
      if (!have->type()->Equals(*want->type()))
        return Status::InvalidArgument("ParquetDataset: column '" + name + "' is " + have->type()->ToString() +
                                       " in " + path + " and " + want->type()->ToString() + " in " + files[0] +
                                       ": the files' schemas differ");
      const int k = Impl::FieldIndex(*r, name);
      Leaves(r->manifest().schema_fields[k], &f->leaves);
    }
    std::sort(f->leaves.begin(), f->leaves.end());
    if (o.window == 0) {
      // A global shuffle: each column's pages, from the file's page index.
      for (const std::string& name : m->names) {
        const int k = Impl::FieldIndex(*r, name);
        std::vector<int> leaves;
        Leaves(r->manifest().schema_fields[k], &leaves);
        STOKER_ASSIGN_OR_RETURN(std::shared_ptr<PageDecoder> d, PageDecoder::Make(f->meta, schema, k, leaves.at(0)));
        Result<std::vector<ColumnPages>> pages = d->Pages(*r->parquet_reader(), path);
        if (!pages.ok()) return Status::FromCode(pages.status().code(), "ParquetDataset: " + pages.status().message());
        f->decoders.push_back(std::move(d));
        f->pages.push_back(std::move(pages).value());
      }
    }
    const uint32_t fi = static_cast<uint32_t>(m->files.size());
    for (int g = 0; g < f->meta->num_row_groups(); ++g) {
      auto rg = f->meta->RowGroup(g);
      const uint64_t n = static_cast<uint64_t>(rg->num_rows());
      if (n == 0) continue;
      uint64_t bytes = 0;
      for (int leaf : f->leaves) bytes += static_cast<uint64_t>(rg->ColumnChunk(leaf)->total_uncompressed_size());
      m->groups.push_back({m->rows, n});
      m->group_file.push_back(fi);
      m->group_local.push_back(static_cast<uint32_t>(g));
      m->estimates.push_back(bytes);
      m->reads.push_back(std::make_unique<std::atomic<uint64_t>>(0));
      m->rows += n;
    }
    m->files.push_back(std::move(f));
  }
  Impl* raw = m.get();
  // Freed blocks kept for the next decodes: a quarter of a shuffle
  // window's row groups, 2 at least.  (A window's row groups are dropped
  // as the next window's are decoded, in bursts: at issue 51's size, 2 row
  // groups' worth made 12% fewer page faults, 8 made 60% fewer and the
  // shuffled epoch 4% faster; docs/benchmarks.md.)
  const uint64_t largest = m->estimates.empty() ? 0 : *std::max_element(m->estimates.begin(), m->estimates.end());
  m->pool.p->SetKeep(largest * std::max<uint32_t>(2, o.window / 4));
  m->cache = std::make_unique<RowGroupCache>(
      static_cast<uint32_t>(m->groups.size()), o.cache_bytes, [raw](uint32_t g) { return raw->Decode(g); },
      [raw](uint32_t g) { return raw->estimates[g]; });
  if (o.window == 0) {
    m->pages = std::make_unique<PageCache>(o.cache_bytes);
    m->by_pages = true;  // (a Mix's source, whose epochs are not its own: shuffled)
  }
  std::unique_ptr<ParquetDataset> d(new ParquetDataset(std::move(m)));
  if (o.cache_bytes == 0) d->SetCacheBudget(d->CacheBytesFor(o.window + 2));
  return d;
}

uint64_t ParquetDataset::CacheBytesFor(uint32_t row_groups) const {
  std::vector<uint64_t> e = impl_->estimates;
  std::sort(e.rbegin(), e.rend());
  uint64_t bytes = uint64_t{64} << 20;
  for (size_t i = 0; i < e.size() && i < row_groups; ++i) bytes += e[i];
  return bytes;
}

void ParquetDataset::SetCacheBudget(uint64_t bytes) {
  impl_->cache->SetBudget(bytes);
  if (impl_->pages) impl_->pages->SetBudget(bytes);
}

void ParquetDataset::StageRows(bool on) {
  impl_->stage_rows.store(on, std::memory_order_relaxed);
  impl_->cache->SetWaitForBegun(on);  // (a shuffled epoch reads by windows)
}

uint64_t ParquetDataset::size() const { return impl_->rows; }
const std::vector<FieldSpec>& ParquetDataset::fields() const { return impl_->fields; }
const std::vector<std::pair<uint64_t, uint64_t>>& ParquetDataset::row_groups() const { return impl_->groups; }
uint32_t ParquetDataset::window() const { return impl_->o.window; }
ParquetStats ParquetDataset::stats() const {
  ParquetStats s = impl_->cache->stats();
  s.cache_budget = impl_->cache->budget();
  s.requests = impl_->fetched->requests.load(std::memory_order_relaxed);
  s.bytes_fetched = impl_->fetched->bytes.load(std::memory_order_relaxed);
  const DecodePool::Stats p = impl_->pool.p->stats();
  s.pool_kept_bytes = p.kept, s.pool_reused = p.reused, s.pool_fresh = p.fresh;
  s.pool_keep = impl_->pool.p->keep();
  if (impl_->pages) {
    s.pages_decoded = impl_->pages->decoded();
    s.decoded_bytes += impl_->pages->held_bytes();
  }
  return s;
}

std::string ParquetDataset::Describe() const {
  return "Parquet files (" + std::to_string(impl_->files.size()) + " from " + impl_->files[0]->path + ", " +
         std::to_string(impl_->groups.size()) + " row groups, " + std::to_string(impl_->rows) + " rows)";
}

std::string ParquetDataset::DescribeSample(uint64_t index) const {
  if (index >= impl_->rows) return "row " + std::to_string(index) + " of " + Describe();
  const uint32_t g = impl_->GroupOf(index);
  return impl_->Where(g) + ", row " + std::to_string(index - impl_->groups[g].first) + " (row " +
         std::to_string(index) + " of the dataset)";
}

namespace {
// The rows whose sizes a reader thread read, copied out of their decoded
// row groups.  A reader reads a batch's sizes, then its rows (the slot is
// sized in between); copying each row once, at its size, and counting it
// read then, makes a batch touch each row group once: a batch that
// begins the next shuffle window while the last rows of this one are in it
// would need both windows' row groups decoded at once (twice the cache),
// or decode some twice.  Read takes a row from here when it is here.  The
// rows of several datasets (a Mix's Parquet sources) are staged side by
// side, each with its dataset: a Mix reads one source's rows after another,
// and a row staged (and counted) must not be located and counted again.
struct Staged {
  bool reading = false;  // rows were taken since: the next size begins a new batch
  // Each row's fields, one after another (grown without zeroing).
  std::unique_ptr<uint8_t[]> bytes;
  uint64_t used = 0, capacity = 0;
  std::vector<uint8_t*> dst;  // (a row's fields, for CopyRow)
  struct Row {
    const void* owner;
    uint64_t index, at, sizes_at;  // sizes_at: its fields' sizes in `sizes`
  };
  std::vector<Row> rows;
  std::vector<uint64_t> sizes;
  size_t next = 0;  // where Read looks first (rows are mostly read in the order they were staged)
  void Reset() {
    reading = false, next = 0, used = 0;
    rows.clear(), sizes.clear();
  }
  // The staged row `index` of `owner`, or nullptr.
  const Row* Find(const void* owner, uint64_t index) {
    for (size_t n = 0; n < rows.size(); ++n) {
      const size_t k = (next + n) % rows.size();
      if (rows[k].index == index && rows[k].owner == owner) {
        next = k + 1;
        return &rows[k];
      }
    }
    return nullptr;
  }
  uint8_t* Grow(uint64_t n) {
    if (used + n > capacity) {
      capacity = std::max<uint64_t>({used + n, 2 * capacity, 1 << 20});
      std::unique_ptr<uint8_t[]> more(new uint8_t[capacity]);
      if (used) std::memcpy(more.get(), bytes.get(), used);
      bytes = std::move(more);
    }
    uint8_t* p = bytes.get() + used;
    used += n;
    return p;
  }
};
thread_local Staged staged;
}  // namespace

// Copies row `row` of g (decoded: t) to dst, field by field; DataLoss
// naming the file, row group, column and row for a null (without
// null_mask) or a null inside a list.
Status ParquetDataset::Impl::CopyRow(const arrow::Table& t, uint32_t g, int64_t row, uint8_t* const* dst) const {
  for (size_t c = 0; c < columns.size(); ++c) {
    int64_t at;
    const arrow::Array& a = RowChunk(t, static_cast<int>(c), row, &at);
    STOKER_RETURN_IF_ERROR(CopyColumn(c, a, at, g, row, dst));
  }
  return Status::OK();
}

Status ParquetDataset::Impl::CopyColumn(size_t c, const arrow::Array& a, int64_t at, uint32_t g, int64_t row,
                                        uint8_t* const* dst) const {
  const bool valid = a.IsValid(at);
  if (!valid && mask_of[c] < 0)
    return Status::DataLoss(Where(g) + ", column '" + names[c] + "': row " + std::to_string(row) +
                            " is null; pass null_mask=True to read nulls as zeros with a '" + names[c] +
                            ".valid' field");
  Status st = columns[c].Copy(a, at, dst[field_of[c]]);
  if (!st.ok())
    return Status::DataLoss(Where(g) + ", column '" + names[c] + "', row " + std::to_string(row) + ": " +
                            st.message());
  if (mask_of[c] >= 0) *dst[mask_of[c]] = valid ? 1 : 0;
  return Status::OK();
}

void ParquetDataset::Impl::CountRead(uint32_t g) {
  if (reads[g]->fetch_add(1, std::memory_order_relaxed) + 1 == groups[g].second) {
    reads[g]->store(0, std::memory_order_relaxed);
    cache->Finished(g);
  }
}

Status ParquetDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  Impl& m = *impl_;
  if (m.by_pages.load(std::memory_order_relaxed)) return PageRowBytes(index, bytes, nullptr);
  uint32_t g;
  int64_t row;
  STOKER_ASSIGN_OR_RETURN(RowGroupCache::Table t, m.Locate(*this, index, &g, &row));
  for (size_t c = 0; c < m.columns.size(); ++c) {
    int64_t at;
    const arrow::Array& a = RowChunk(*t, static_cast<int>(c), row, &at);
    bytes[m.field_of[c]] = m.columns[c].Bytes(a, at);
    if (m.mask_of[c] >= 0) bytes[m.mask_of[c]] = 1;
  }
  if (!m.stage_rows.load(std::memory_order_relaxed)) return Status::OK();
  Staged& s = staged;
  if (s.reading) s.Reset();
  const size_t nf = m.fields.size();
  uint64_t total = 0;
  for (size_t f = 0; f < nf; ++f) total += bytes[f];
  const uint64_t at = s.used;
  uint8_t* p = s.Grow(total);
  s.dst.resize(nf);
  for (size_t f = 0; f < nf; p += bytes[f], ++f) s.dst[f] = p;
  Status st = m.CopyRow(*t, g, row, s.dst.data());
  if (!st.ok()) {
    s.used = at;
    return st;
  }
  s.rows.push_back({this, index, at, s.sizes.size()});
  s.sizes.insert(s.sizes.end(), bytes, bytes + nf);
  t.reset();
  m.CountRead(g);
  return Status::OK();
}

Status ParquetDataset::Read(uint64_t index, uint8_t* const* dst) {
  Impl& m = *impl_;
  Staged& s = staged;
  if (m.stage_rows.load(std::memory_order_relaxed) && !s.rows.empty()) {
    s.reading = true;
    if (const Staged::Row* r = s.Find(this, index)) {
      const uint64_t* size = s.sizes.data() + r->sizes_at;
      const uint8_t* p = s.bytes.get() + r->at;
      for (size_t f = 0; f < m.fields.size(); p += size[f], ++f) std::memcpy(dst[f], p, size[f]);
      return Status::OK();
    }
  }
  if (m.by_pages.load(std::memory_order_relaxed)) return PageRowBytes(index, nullptr, dst);
  uint32_t g;
  int64_t row;
  STOKER_ASSIGN_OR_RETURN(RowGroupCache::Table t, m.Locate(*this, index, &g, &row));
  STOKER_RETURN_IF_ERROR(m.CopyRow(*t, g, row, dst));
  t.reset();
  m.CountRead(g);
  return Status::OK();
}

Status ParquetDataset::PageRowBytes(uint64_t index, uint64_t* bytes, uint8_t* const* dst) {
  // (no staging: a row's pages are in the page cache when its size is read
  // and again, most likely, when it is copied; their rows are few)
  Impl& m = *impl_;
  thread_local std::vector<PageCache::Page> page;
  thread_local std::vector<int64_t> at;
  uint32_t g;
  Status st = m.PageRow(*this, index, &g, &page, &at);
  const int64_t row = static_cast<int64_t>(index - (index < m.rows ? m.groups[g].first : 0));
  for (size_t c = 0; st.ok() && c < m.columns.size(); ++c) {
    if (bytes) {
      bytes[m.field_of[c]] = m.columns[c].Bytes(*page[c], at[c]);
      if (m.mask_of[c] >= 0) bytes[m.mask_of[c]] = 1;
    } else {
      st = m.CopyColumn(c, *page[c], at[c], g, row, dst);
    }
  }
  for (auto& p : page) p.reset();
  return st;
}

std::vector<int64_t> ParquetDataset::GlobalOrder(const OrderRecipe& o) const {
  if (impl_->o.window == 0) return o.Global(impl_->rows);  // (a global shuffle; in order when not shuffled)
  return o.GlobalByShards(impl_->groups, impl_->o.window);
}

std::vector<int64_t> ParquetDataset::Order(const OrderRecipe& o) {
  std::vector<int64_t> mine = o.RankPart(GlobalOrder(o), RankSplit::kContiguous);
  if (impl_->pages) {
    // A global shuffle reads rows through their pages; an epoch in order,
    // through its row groups.  The other cache's data goes.
    impl_->by_pages.store(o.shuffle, std::memory_order_relaxed);
    if (o.shuffle) {
      impl_->cache->DropUnheld();
      impl_->cache->SetAhead({});
      impl_->pool.p->ReleaseUnused();  // (the pages are decoded into Arrow's pool, in the same budget)
      return mine;
    }
    impl_->pages->Clear();
  }
  impl_->stage_rows.store(o.shuffle, std::memory_order_relaxed);
  std::vector<uint32_t> group_at(mine.size());
  for (size_t p = 0; p < mine.size(); ++p) group_at[p] = impl_->GroupOf(static_cast<uint64_t>(mine[p]));
  impl_->cache->SetAhead(group_at);
  return mine;
}

}  // namespace stoker
