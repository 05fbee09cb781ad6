// parquet/: ParquetColumn (an Arrow column as a field, one row's copy),
// RowGroupCache (each row group decoded once, under a budget) and
// ParquetDataset over files written by Arrow's own Parquet writer.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "parquet/parquet_columns.h"
#include "parquet/row_group_cache.h"
#include "stoker/parquet_dataset.h"
#include "watchdog.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

template <typename B, typename T>
std::shared_ptr<arrow::Array> Build(const std::vector<T>& values, const std::vector<bool>& valid = {}) {
  B b;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!valid.empty() && !valid[i]) EXPECT_TRUE(b.AppendNull().ok());
    else EXPECT_TRUE(b.Append(values[i]).ok());
  }
  return b.Finish().ValueOrDie();
}

TEST(ParquetColumn, NumbersWithNullsCopyAsTheirBytes) {
  auto a = Build<arrow::Int32Builder, int32_t>({7, 0, -3}, {true, false, true});
  auto c = ParquetColumn::Make("x", a->type());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->field().dtype, ElementType::kInt32);
  EXPECT_FALSE(c->variable());
  int32_t v = 99;
  ASSERT_TRUE(c->Copy(*a, 2, reinterpret_cast<uint8_t*>(&v)).ok());
  EXPECT_EQ(v, -3);
  ASSERT_TRUE(c->Copy(*a, 1, reinterpret_cast<uint8_t*>(&v)).ok());
  EXPECT_EQ(v, 0) << "a null reads as zeros";
  // A slice keeps its offset.
  ASSERT_TRUE(c->Copy(*a->Slice(2), 0, reinterpret_cast<uint8_t*>(&v)).ok());
  EXPECT_EQ(v, -3);
}

TEST(ParquetColumn, FixedListsListsStringsBinaryDictionariesAndBools) {
  auto values = Build<arrow::FloatBuilder, float>({1, 2, 3, 4, 5, 6});
  auto fixed = arrow::FixedSizeListArray::FromArrays(values, 3).ValueOrDie();
  auto fc = ParquetColumn::Make("emb", fixed->type()).value();
  EXPECT_EQ(fc.field().shape, std::vector<int64_t>{3});
  float row[3];
  ASSERT_TRUE(fc.Copy(*fixed, 1, reinterpret_cast<uint8_t*>(row)).ok());
  EXPECT_EQ(row[0], 4.f);
  EXPECT_EQ(row[2], 6.f);

  auto offsets = Build<arrow::Int32Builder, int32_t>({0, 2, 2, 5});
  auto items = Build<arrow::Int64Builder, int64_t>({10, 11, 12, 13, 14});
  auto list = arrow::ListArray::FromArrays(*offsets, *items).ValueOrDie();
  auto lc = ParquetColumn::Make("toks", list->type()).value();
  EXPECT_TRUE(lc.variable());
  EXPECT_EQ(lc.Bytes(*list, 0), 16u);
  EXPECT_EQ(lc.Bytes(*list, 1), 0u);
  int64_t got[3];
  ASSERT_TRUE(lc.Copy(*list, 2, reinterpret_cast<uint8_t*>(got)).ok());
  EXPECT_EQ(got[0], 12);
  EXPECT_EQ(got[2], 14);

  auto text = Build<arrow::StringBuilder, std::string>({"a", "héllo", ""});
  auto sc = ParquetColumn::Make("text", text->type()).value();
  EXPECT_EQ(sc.field().leaf, FieldLeaf::kStr);
  EXPECT_EQ(sc.Bytes(*text, 1), 6u);
  char buf[8] = {};
  ASSERT_TRUE(sc.Copy(*text, 1, reinterpret_cast<uint8_t*>(buf)).ok());
  EXPECT_EQ(std::string(buf, 6), "héllo");
  auto bin = Build<arrow::BinaryBuilder, std::string>({"\x01", std::string(2, '\0')});
  EXPECT_EQ(ParquetColumn::Make("img", bin->type()).value().field().leaf, FieldLeaf::kBytes);

  auto dict = arrow::DictionaryArray::FromArrays(arrow::dictionary(arrow::int32(), arrow::utf8()),
                                                 Build<arrow::Int32Builder, int32_t>({1, 0, 1}),
                                                 Build<arrow::StringBuilder, std::string>({"web", "books"}))
                  .ValueOrDie();
  auto dc = ParquetColumn::Make("cat", dict->type()).value();
  EXPECT_EQ(dc.Bytes(*dict, 0), 5u);
  ASSERT_TRUE(dc.Copy(*dict, 1, reinterpret_cast<uint8_t*>(buf)).ok());
  EXPECT_EQ(std::string(buf, 3), "web");

  arrow::BooleanBuilder bb;
  ASSERT_TRUE(bb.AppendValues(std::vector<bool>{false, true}).ok());
  auto flags = bb.Finish().ValueOrDie();
  uint8_t flag = 7;
  ASSERT_TRUE(ParquetColumn::Make("flag", flags->type()).value().Copy(*flags, 1, &flag).ok());
  EXPECT_EQ(flag, 1);
}

TEST(ParquetColumn, RefusesWhatItCannotReadNamingTheColumnAndType) {
  auto nested = arrow::list(arrow::list(arrow::int32()));
  auto c = ParquetColumn::Make("n", nested);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("column 'n' is list<"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("columns="), std::string::npos);
  EXPECT_FALSE(ParquetColumn::Make("s", arrow::struct_({arrow::field("a", arrow::int32())})).ok());
}

std::shared_ptr<arrow::Table> Ints(int64_t first, int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = first + i;
  auto a = Build<arrow::Int64Builder, int64_t>(v);
  return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64())}), {a});
}

// A cache of `groups` row groups of 100 ints (800 bytes decoded) under
// `budget`, whose row groups are estimated at `estimate` bytes; decodes
// counted in *decodes.
std::unique_ptr<RowGroupCache> CountingCache(uint32_t groups, uint64_t budget, uint64_t estimate,
                                             std::atomic<int>* decodes) {
  return std::make_unique<RowGroupCache>(
      groups, budget,
      [decodes](uint32_t) -> Result<RowGroupCache::Table> {
        ++*decodes;
        return RowGroupCache::Table(Ints(0, 100));
      },
      [estimate](uint32_t) { return estimate; });
}

TEST(RowGroupCache, EachRowGroupIsDecodedOnceByOneOfManyReaders) {
  testing::Watchdog wd(std::chrono::seconds(60));
  std::atomic<int> decodes{0};
  RowGroupCache cache(
      4, 1 << 20,
      [&](uint32_t g) -> Result<RowGroupCache::Table> {
        ++decodes;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return RowGroupCache::Table(Ints(g * 100, 100));
      },
      [](uint32_t) { return 800; });
  cache.SetAhead({0, 1, 2, 3});
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      for (uint32_t g = 0; g < 4; ++g) {
        auto table = cache.Get(g);
        if (!table.ok() || (*table)->num_rows() != 100) ++wrong;
      }
    });
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(decodes.load(), 4);
  EXPECT_EQ(cache.stats().row_groups_decoded, 4u);
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(RowGroupCache, FinishedRowGroupsGoFirstAndHeldOnesStay) {
  std::vector<uint32_t> order;
  RowGroupCache cache(
      4, 2000,  // two row groups of 800 bytes fit
      [&](uint32_t g) -> Result<RowGroupCache::Table> {
        order.push_back(g);
        return RowGroupCache::Table(Ints(0, 100));
      },
      [](uint32_t) { return 800; });
  auto held = cache.Get(0).value();  // held by a reader: never dropped
  ASSERT_TRUE(cache.Get(1).ok());
  ASSERT_TRUE(cache.Get(2).ok());  // room: 1 goes (0 is held)
  EXPECT_EQ(cache.stats().evictions, 1u);
  cache.Finished(2);
  ASSERT_TRUE(cache.Get(3).ok());  // 2 was finished: it goes
  ASSERT_TRUE(cache.Get(0).ok());
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_LE(cache.stats().peak_decoded_bytes, 3 * 800u + 1024);
}

// The decoder ahead takes only free room or room finished row groups hold:
// a row group readers are still reading is never dropped for one they have
// not asked for yet.
TEST(RowGroupCache, TheDecoderAheadNeverDropsARowGroupStillBeingRead) {
  testing::Watchdog wd(std::chrono::seconds(60));
  std::atomic<int> decodes{0};
  // (two row groups of 800 bytes fit; an estimate short of the 800 bytes decoded, as Arrow's often is)
  auto owned = CountingCache(3, 2000, 300, &decodes);
  RowGroupCache& cache = *owned;
  ASSERT_TRUE(cache.Get(0).ok());  // 0 and 1: read, not finished, held by no one
  ASSERT_TRUE(cache.Get(1).ok());
  cache.SetAhead({0, 1, 2});
  ASSERT_TRUE(cache.Get(1).ok());  // (the first read with an order starts the decoder ahead)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(decodes.load(), 2) << "row group 2 would have dropped 0, still being read";
  EXPECT_EQ(cache.stats().evictions, 0u);
  cache.Finished(0);
  for (int i = 0; i < 200 && decodes.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(decodes.load(), 3) << "row group 0 finished: its room is row group 2's";
  ASSERT_TRUE(cache.Get(1).ok());
  ASSERT_TRUE(cache.Get(2).ok());
  EXPECT_EQ(decodes.load(), 3) << "1 was kept, 2 was decoded ahead";
}

// A reader that needs room does not drop row groups wholly behind it in
// the order while other readers finish them: it waits, then takes the
// finished one's room.
TEST(RowGroupCache, AReaderWaitsForRowGroupsBehindItRatherThanDropThem) {
  testing::Watchdog wd(std::chrono::seconds(60));
  std::atomic<int> decodes{0};
  auto owned = CountingCache(3, 2000, 800, &decodes);  // (two row groups of 800 bytes fit)
  RowGroupCache& cache = *owned;
  cache.SetAhead({0, 1, 0, 1, 2, 2});  // 0 and 1 end before 2 begins
  ASSERT_TRUE(cache.Get(0).ok());
  ASSERT_TRUE(cache.Get(1).ok());
  std::thread behind([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cache.Finished(0);  // (the reader behind reads 0's last row)
  });
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(cache.Get(2).ok());
  const auto waited = std::chrono::steady_clock::now() - t0;
  behind.join();
  EXPECT_GE(waited, std::chrono::milliseconds(40));
  EXPECT_LT(waited, RowGroupCache::kBehindWait) << "0 was finished at 50 ms";
  EXPECT_EQ(decodes.load(), 3);
  EXPECT_EQ(cache.stats().evictions, 1u);
  ASSERT_TRUE(cache.Get(1).ok());  // 1, not finished, was kept
  EXPECT_EQ(decodes.load(), 3);
  EXPECT_EQ(cache.stats().behind_timeouts, 0u);
}

// Row groups behind that no reader finishes (a resumed epoch read part of
// them) are waited for once, kBehindWait, then count as finished.
TEST(RowGroupCache, RowGroupsBehindThatNoOneFinishesAreDroppedAfterTheWait) {
  testing::Watchdog wd(std::chrono::seconds(60));
  std::atomic<int> decodes{0};
  auto owned = CountingCache(4, 2000, 800, &decodes);
  RowGroupCache& cache = *owned;
  cache.SetAhead({0, 1, 2, 3});
  ASSERT_TRUE(cache.Get(0).ok());
  ASSERT_TRUE(cache.Get(1).ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(cache.Get(2).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, RowGroupCache::kBehindWait - std::chrono::milliseconds(10));
  EXPECT_EQ(cache.stats().behind_timeouts, 1u);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(cache.Get(3).ok());  // (1 counts as finished now: no second wait)
  EXPECT_LT(std::chrono::steady_clock::now() - t1, RowGroupCache::kBehindWait);
  EXPECT_EQ(cache.stats().behind_timeouts, 1u);
}

// Among unfinished row groups, one decoded ahead and not read yet goes
// before one readers are reading, the one needed last first.
TEST(RowGroupCache, RowGroupsDecodedAheadGoBeforeOnesBeingRead) {
  std::vector<uint32_t> decoded;
  RowGroupCache cache(
      4, 2000,
      [&](uint32_t g) -> Result<RowGroupCache::Table> {
        decoded.push_back(g);
        return RowGroupCache::Table(Ints(0, 100));
      },
      [](uint32_t) { return 800; });
  ASSERT_TRUE(cache.Get(0).ok());  // read (no order given: no decoder ahead)
  ASSERT_TRUE(cache.Get(1).ok());
  cache.Finished(1);
  cache.SetAhead({0, 2, 3, 0});  // (set after the reads: the decoder ahead starts at the next one)
  ASSERT_TRUE(cache.Get(0).ok());
  for (int i = 0; i < 200 && decoded.size() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(decoded, (std::vector<uint32_t>{0, 1, 2})) << "2 decoded ahead into finished 1's room";
  ASSERT_TRUE(cache.Get(3).ok());  // room: 2 (decoded ahead, unread) goes, not 0 (being read)
  ASSERT_TRUE(cache.Get(0).ok());
  EXPECT_EQ(decoded, (std::vector<uint32_t>{0, 1, 2, 3}));
}

TEST(RowGroupCache, AFailedDecodeIsEveryReadersError) {
  RowGroupCache cache(
      1, 1 << 20, [](uint32_t) -> Result<RowGroupCache::Table> { return Status::DataLoss("f.parquet, row group 0: bad"); },
      [](uint32_t) { return 0; });
  EXPECT_EQ(cache.Get(0).status().message(), "f.parquet, row group 0: bad");
  EXPECT_EQ(cache.Get(0).status().code(), Status::Code::kDataLoss);
}

std::string Write(const std::string& path, const std::shared_ptr<arrow::Table>& t, int64_t group_rows) {
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  EXPECT_TRUE(parquet::arrow::WriteTable(*t, arrow::default_memory_pool(), out, group_rows).ok());
  EXPECT_TRUE(out->Close().ok());
  return path;
}

std::shared_ptr<arrow::Table> Rows(int64_t first, int64_t n) {
  std::vector<int64_t> ids(n);
  std::vector<std::string> text(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = first + i, text[i] = "row " + std::to_string(first + i);
  return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()), arrow::field("text", arrow::utf8())}),
                            {Build<arrow::Int64Builder, int64_t>(ids), Build<arrow::StringBuilder, std::string>(text)});
}

TEST(ParquetDataset, ReadsRowsOfManyFilesAndShufflesByRowGroupWindows) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = ::testing::TempDir() + "parquet_" + std::to_string(getpid());
  fs::create_directories(dir);
  const std::vector<std::string> paths = {Write(dir + "/a.parquet", Rows(0, 250), 100),
                                          Write(dir + "/b.parquet", Rows(250, 150), 50)};
  ParquetOptions o;
  o.window = 2;
  auto ds = ParquetDataset::Open(paths, o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ParquetDataset& d = *ds.value();
  ASSERT_EQ(d.size(), 400u);
  ASSERT_EQ(d.row_groups().size(), 3u + 3u);
  EXPECT_EQ(d.fields()[1].leaf, FieldLeaf::kStr);
  for (uint64_t i : {0u, 99u, 100u, 249u, 250u, 399u}) {
    uint64_t bytes[2];
    ASSERT_TRUE(d.SampleBytes(i, bytes).ok());
    std::vector<uint8_t> text(bytes[1]);
    int64_t id = -1;
    uint8_t* dst[2] = {reinterpret_cast<uint8_t*>(&id), text.data()};
    ASSERT_TRUE(d.Read(i, dst).ok());
    EXPECT_EQ(id, static_cast<int64_t>(i));
    EXPECT_EQ(std::string(text.begin(), text.end()), "row " + std::to_string(i));
  }
  EXPECT_NE(d.DescribeSample(260).find("b.parquet, row group 0, row 10"), std::string::npos) << d.DescribeSample(260);
  OrderRecipe r;
  r.shuffle = true, r.seed = 5, r.epoch = 1;
  std::vector<int64_t> order = d.Order(r);
  ASSERT_EQ(order.size(), 400u);
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 400u);
  // Two row groups at a time: the first 2 groups met hold the first rows.
  auto group = [&](int64_t i) {
    const auto& g = d.row_groups();
    size_t k = 0;
    while (k + 1 < g.size() && static_cast<uint64_t>(i) >= g[k + 1].first) ++k;
    return k;
  };
  std::set<size_t> first_window;
  for (int64_t i : order) {
    first_window.insert(group(i));
    if (first_window.size() == 2) break;
  }
  uint64_t rows = 0;
  for (size_t k : first_window) rows += d.row_groups()[k].second;
  for (uint64_t p = 0; p < rows; ++p) EXPECT_TRUE(first_window.count(group(order[p]))) << p;
  fs::remove_all(dir);
}

TEST(ParquetDataset, FilesThatDisagreeAreErrorsNamingThem) {
  const std::string dir = ::testing::TempDir() + "parquet_bad_" + std::to_string(getpid());
  fs::create_directories(dir);
  const std::string a = Write(dir + "/a.parquet", Rows(0, 10), 10);
  const std::string b = Write(dir + "/b.parquet", Ints(0, 10), 10);
  auto ds = ParquetDataset::Open({a, b}, ParquetOptions{});
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("b.parquet has no column 'text'"), std::string::npos) << ds.status().message();
  ParquetOptions cols;
  cols.columns = {"nope"};
  ds = ParquetDataset::Open({a}, cols);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("no column 'nope' (its columns: id, text)"), std::string::npos);
  const std::string cut = dir + "/cut.parquet";
  fs::copy_file(a, cut);
  fs::resize_file(cut, fs::file_size(cut) - 20);
  ds = ParquetDataset::Open({cut}, ParquetOptions{});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(ds.status().message().find("cut.parquet"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
