// Shard formats of the native read path: CRC-32C, TFRecord framing, index
// and tf.train.Example decoding (cross-checked with the generated Example
// class), tar listing and WebDataset grouping, and skip-and-count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "example.pb.h"
#include "collate/collate_copy.h"
#include "io/crc32c.h"
#include "io/example_decoder.h"
#include "io/tar_file.h"
#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "io/tfrecord_file.h"
#include "io/tfrecord_writer.h"

namespace stoker {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "stoker_fmt_" + name + "_" + std::to_string(getpid());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void RemoveWithIndex(const std::string& path) {
  std::remove(path.c_str());
  std::remove((path + ".stoker-index").c_str());
}

TEST(Crc32c, KnownVectorsAndEveryImplementationAgrees) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cOwnExtend(0, "123456789", 9), 0xe3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8a9136aau);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62a8ab43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46dd794eu);
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(200000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len : {0ul, 1ul, 7ul, 8ul, 63ul, 24575ul, 24576ul, 24577ul, 73729ul, 199990ul}) {
    const size_t off = rng() % 9;
    EXPECT_EQ(Crc32c(buf.data() + off, len), Crc32cSoftwareExtend(0, buf.data() + off, len)) << len;
    EXPECT_EQ(Crc32cOwnExtend(0, buf.data() + off, len), Crc32cSoftwareExtend(0, buf.data() + off, len)) << len;
    // Extending in two pieces is the same as one.
    const size_t cut = len / 3;
    EXPECT_EQ(Crc32cExtend(Crc32c(buf.data() + off, cut), buf.data() + off + cut, len - cut),
              Crc32c(buf.data() + off, len));
    EXPECT_EQ(Crc32cOwnExtend(Crc32c(buf.data() + off, cut), buf.data() + off + cut, len - cut),
              Crc32c(buf.data() + off, len));
  }
#if defined(STOKER_HAVE_ISAL)
  EXPECT_STREQ(Crc32cImplementation(), "isa-l");
#endif
}

TEST(CollateCopy, CopiesEveryByteAtAnyAlignmentAndSize) {
  std::mt19937_64 rng(11);
  std::vector<uint8_t> src(kCollateCopyStreamingMin * 3 + 200);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const size_t t = kCollateCopyStreamingMin;
  for (size_t len : {size_t{0}, size_t{1}, size_t{63}, t - 1, t, t + 1, t + 63, t + 64, 2 * t + 17, 3 * t}) {
    for (size_t so : {0, 1, 9}) {
      for (size_t dof : {0, 3, 16}) {
        std::vector<uint8_t> dst(len + 64, 0xAB);
        CollateCopy(dst.data() + dof, src.data() + so, len);
        ASSERT_EQ(0, std::memcmp(dst.data() + dof, src.data() + so, len)) << len << " " << so << " " << dof;
        for (size_t i = 0; i < dof; ++i) ASSERT_EQ(dst[i], 0xAB) << "wrote before the destination";
        for (size_t i = dof + len; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "wrote past the destination";
      }
    }
  }
}

TEST(Crc32c, CursorCountsEveryByteOnceInOrder) {
  std::mt19937_64 rng(3);
  std::vector<uint8_t> buf(300000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t want = Crc32c(buf.data(), buf.size());
  for (int trial = 0; trial < 20; ++trial) {
    Crc32cCursor c(buf.data(), buf.data() + buf.size());
    std::vector<uint8_t> out(buf.size());
    // Copies of random spans, some behind the cursor, some overlapping it.
    for (int k = 0; k < 8; ++k) {
      const size_t a = rng() % buf.size(), n = rng() % (buf.size() - a);
      c.Copy(out.data() + a, buf.data() + a, n);
      EXPECT_EQ(std::memcmp(out.data() + a, buf.data() + a, n), 0);
    }
    EXPECT_EQ(c.Finish(), want);
  }
}

// A record of every kind of feature, as a TensorFlow program would write it.
std::string ExampleBytes(int i) {
  tf::Example ex;
  auto& m = *ex.mutable_features()->mutable_feature();
  for (int k = 0; k < 6; ++k) m["x"].mutable_float_list()->add_value(static_cast<float>(i * 10 + k));
  m["y"].mutable_int64_list()->add_value(i);
  int16_t raw[4] = {static_cast<int16_t>(i), -1, 2, 3};
  m["raw"].mutable_bytes_list()->add_value(std::string(reinterpret_cast<char*>(raw), 8));
  m["unused"].mutable_bytes_list()->add_value("ignored");
  std::string s;
  ex.SerializeToString(&s);
  return s;
}

std::vector<FieldSpec> Specs() {
  return {{"x", ElementType::kFloat32, {2, 3}}, {"y", ElementType::kInt64, {}}, {"raw", ElementType::kInt16, {4}}};
}

std::string WriteTFRecords(const std::string& path, int n) {
  std::string file;
  for (int i = 0; i < n; ++i) {
    const std::string e = ExampleBytes(i);
    AppendTFRecord(&file, e.data(), e.size());
  }
  WriteFile(path, file);
  return file;
}

struct Sample {
  float x[6];
  int64_t y;
  int16_t raw[4];
  uint8_t* dst[3] = {reinterpret_cast<uint8_t*>(x), reinterpret_cast<uint8_t*>(&y), reinterpret_cast<uint8_t*>(raw)};
};

TEST(TFRecord, ReadsDecodesAndCachesTheIndex) {
  const std::string path = TempPath("ok.tfrecord");
  WriteTFRecords(path, 50);
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 50u);
  EXPECT_EQ(ds.value()->index_paths()[0], path + ".stoker-index");
  Sample s;
  for (uint64_t i : {0u, 17u, 49u}) {
    ASSERT_TRUE(ds.value()->Read(i, s.dst).ok());
    EXPECT_EQ(s.x[0], i * 10.0f);
    EXPECT_EQ(s.x[5], i * 10.0f + 5);
    EXPECT_EQ(s.y, static_cast<int64_t>(i));
    EXPECT_EQ(s.raw[0], static_cast<int16_t>(i));
    EXPECT_EQ(s.raw[1], -1);
  }
  // Second open: the index comes from the cache file.
  FileReader f = std::move(FileReader::Open(path)).value();
  auto idx = LoadOrBuildTFRecordIndex(f, {});
  ASSERT_TRUE(idx.ok());
  EXPECT_TRUE(idx.value().loaded_from_cache);
  EXPECT_EQ(idx.value().records.size(), 50u);
  // The file changes: the cached index is stale and rebuilt.
  WriteTFRecords(path, 7);
  FileReader g = std::move(FileReader::Open(path)).value();
  auto idx2 = LoadOrBuildTFRecordIndex(g, {});
  ASSERT_TRUE(idx2.ok());
  EXPECT_FALSE(idx2.value().loaded_from_cache);
  EXPECT_EQ(idx2.value().records.size(), 7u);
  // A corrupt index file is rebuilt, not trusted.
  std::string bytes = ReadFile(path + ".stoker-index");
  bytes[70] ^= 1;
  WriteFile(path + ".stoker-index", bytes);
  FileReader h = std::move(FileReader::Open(path)).value();
  auto idx3 = LoadOrBuildTFRecordIndex(h, {});
  ASSERT_TRUE(idx3.ok());
  EXPECT_FALSE(idx3.value().loaded_from_cache);
  RemoveWithIndex(path);
}

TEST(TFRecord, IndexDirAndMmapAndOnePassWriter) {
  const std::string path = TempPath("w.tfrecord");
  const std::string dir = TempPath("idxdir");
  auto w = TFRecordWriter::Create(path);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 10; ++i) {
    float xs[6];
    for (int k = 0; k < 6; ++k) xs[k] = static_cast<float>(i * 10 + k);
    int64_t y = i;
    int16_t raw[4] = {static_cast<int16_t>(i), -1, 2, 3};
    FeatureValue fx{"x", FeatureValue::Kind::kFloat, xs, nullptr, {}, 6};
    FeatureValue fy{"y", FeatureValue::Kind::kInt64, nullptr, &y, {}, 1};
    FeatureValue fr{"raw", FeatureValue::Kind::kBytes, nullptr, nullptr,
                    {std::string_view(reinterpret_cast<char*>(raw), 8)}, 0};
    ASSERT_TRUE(w.value()->Write({fx, fy, fr}).ok());
  }
  ASSERT_TRUE(w.value()->Close().ok());
  // What the writer wrote parses as an Example with the generated class.
  FileReader f = std::move(FileReader::Open(path)).value();
  auto idx = LoadOrBuildTFRecordIndex(f, {dir, false});
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(idx.value().cache_path.rfind(dir, 0), 0u) << idx.value().cache_path;
  std::vector<uint8_t> buf;
  uint32_t stored = 0;
  auto rec = ReadTFRecord(f, idx.value().records[3], 3, true, &buf, &stored);
  ASSERT_TRUE(rec.ok());
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromArray(rec.value(), static_cast<int>(idx.value().records[3].length)));
  EXPECT_EQ(ex.features().feature().at("x").float_list().value(2), 32.0f);
  EXPECT_EQ(ex.features().feature().at("y").int64_list().value(0), 3);
  TFRecordOptions o;
  o.index_dir = dir;
  o.io = IoMode::kMmap;
  auto ds = TFRecordDataset::Open({path, path}, Specs(), o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 20u);
  Sample s;
  ASSERT_TRUE(ds.value()->Read(13, s.dst).ok());
  EXPECT_EQ(s.y, 3);
  EXPECT_EQ(s.x[1], 31.0f);
  std::remove(path.c_str());
  std::remove(idx.value().cache_path.c_str());
  rmdir(dir.c_str());
}

TEST(TFRecord, BadCrcNamesFileRecordOffsetAndSkipCounts) {
  const std::string path = TempPath("crc.tfrecord");
  std::string file = WriteTFRecords(path, 5);
  const std::string r0 = ExampleBytes(0);
  const uint64_t rec1 = kTFRecordHeader + r0.size() + kTFRecordFooter;
  file[rec1 + kTFRecordHeader + 5] ^= 0x40;  // a data byte of record 1
  WriteFile(path, file);
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_TRUE(ds.ok());
  Sample s;
  Status st = ds.value()->Read(1, s.dst);
  ASSERT_TRUE(st.IsDataLoss()) << st.ToString();
  EXPECT_NE(st.message().find(path + ", record 1 (byte offset " + std::to_string(rec1) + ")"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("data's CRC does not match"), std::string::npos);
  EXPECT_TRUE(ds.value()->Read(2, s.dst).ok());
  // Without verification the flipped byte goes through undetected.
  TFRecordOptions o;
  o.verify_crc = false;
  auto nv = TFRecordDataset::Open({path}, Specs(), o);
  ASSERT_TRUE(nv.ok());
  EXPECT_EQ(nv.value()->Read(1, s.dst).message().find("CRC"), std::string::npos);
  RemoveWithIndex(path);
}

TEST(TFRecord, TruncatedFileRaisesOrSkipsTheTail) {
  const std::string path = TempPath("trunc.tfrecord");
  std::string file = WriteTFRecords(path, 4);
  WriteFile(path, file.substr(0, file.size() - 10));
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(ds.status().IsDataLoss());
  EXPECT_NE(ds.status().message().find(path + ", record 3"), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find("truncated"), std::string::npos);
  TFRecordOptions o;
  o.on_error = OnError::kSkip;
  auto skip = TFRecordDataset::Open({path}, Specs(), o);
  ASSERT_TRUE(skip.ok()) << skip.status().ToString();
  EXPECT_EQ(skip.value()->size(), 3u);
  EXPECT_EQ(skip.value()->skipped(), 1u);
  EXPECT_NE(skip.value()->last_skipped().find("record 3"), std::string::npos);
  // The saved index remembers the bad tail; raising mode still raises.
  auto again = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("record 3"), std::string::npos);
  // Not a TFRecord file at all.
  WriteFile(path, std::string(100, 'a'));
  auto junk = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("record 0 (byte offset 0)"), std::string::npos) << junk.status().message();
  RemoveWithIndex(path);
  auto missing = TFRecordDataset::Open({path + ".nope"}, Specs());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path + ".nope"), std::string::npos);
}

Status DecodeOne(const std::string& rec, const std::vector<FieldSpec>& specs, std::vector<std::string>* out) {
  out->clear();
  std::vector<uint8_t*> dst;
  for (const FieldSpec& f : specs) out->emplace_back(f.bytes(), '\0');
  for (std::string& b : *out) dst.push_back(reinterpret_cast<uint8_t*>(b.data()));
  return ExampleDecoder(specs).Decode(reinterpret_cast<const uint8_t*>(rec.data()), rec.size(), dst.data());
}

TEST(ExampleDecoder, ConversionsAndClearErrors) {
  tf::Example ex;
  auto& m = *ex.mutable_features()->mutable_feature();
  for (float v : {1.5f, -2.0f, 65504.0f}) m["f"].mutable_float_list()->add_value(v);
  for (int64_t v : {0, 255, 7}) m["i"].mutable_int64_list()->add_value(v);
  m["big"].mutable_int64_list()->add_value(300);
  std::string rec;
  ex.SerializeToString(&rec);
  std::vector<std::string> out;
  // float_list -> float64 and float16; int64_list -> uint8.
  ASSERT_TRUE(DecodeOne(rec, {{"f", ElementType::kFloat64, {3}}, {"i", ElementType::kUInt8, {3}}}, &out).ok());
  double d[3];
  std::memcpy(d, out[0].data(), 24);
  EXPECT_EQ(d[1], -2.0);
  EXPECT_EQ(static_cast<uint8_t>(out[1][1]), 255);
  ASSERT_TRUE(DecodeOne(rec, {{"f", ElementType::kFloat16, {3}}}, &out).ok());
  uint16_t h[3];
  std::memcpy(h, out[0].data(), 6);
  EXPECT_EQ(h[0], 0x3e00);  // 1.5
  EXPECT_EQ(h[2], 0x7bff);  // 65504
  auto expect_error = [&](std::vector<FieldSpec> specs, const std::string& want) {
    Status st = DecodeOne(rec, specs, &out);
    ASSERT_TRUE(st.IsDataLoss()) << want;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  };
  expect_error({{"f", ElementType::kFloat32, {4}}}, "feature 'f' is a float_list of 3 values; declared float32 (4,) needs 4");
  expect_error({{"f", ElementType::kFloat32, {2}}}, "feature 'f' is a float_list of 3 values");
  expect_error({{"f", ElementType::kInt64, {3}}}, "feature 'f' is a float_list; declared int64 (3,) needs int64_list");
  expect_error({{"i", ElementType::kFloat32, {3}}}, "is a int64_list; declared float32 (3,) needs float_list");
  expect_error({{"big", ElementType::kUInt8, {}}}, "value 300 (element 0) does not fit declared uint8 ()");
  expect_error({{"nope", ElementType::kUInt8, {}}}, "feature 'nope' is missing from the record (it has ");
  // Garbage is malformed, not a crash.
  Status junk = DecodeOne(std::string("\x0a\xff\xff\xff\x0f", 5), {{"f", ElementType::kFloat32, {3}}}, &out);
  EXPECT_TRUE(junk.IsDataLoss());
}

TEST(ExampleDecoder, UnpackedValuesAndEntryFieldOrder) {
  // Hand-encoded: Example{features{feature{ value: float_list{1.0 unpacked, 2.0 unpacked}, key "v" }}}
  // with the map entry's value before its key (parsers must accept any order).
  std::string flist = std::string("\x0d", 1) + std::string("\x00\x00\x80\x3f", 4) + std::string("\x0d", 1) +
                      std::string("\x00\x00\x00\x40", 4);                     // FloatList, two fixed32 values
  std::string feature = "\x12" + std::string(1, static_cast<char>(flist.size())) + flist;  // Feature.float_list
  std::string entry = "\x12" + std::string(1, static_cast<char>(feature.size())) + feature + "\x0a\x01v";
  std::string features = "\x0a" + std::string(1, static_cast<char>(entry.size())) + entry;
  std::string example = "\x0a" + std::string(1, static_cast<char>(features.size())) + features;
  std::vector<std::string> out;
  Status st = DecodeOne(example, {{"v", ElementType::kFloat32, {2}}}, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  float v[2];
  std::memcpy(v, out[0].data(), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
}

std::string TarOf(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string t;
  for (const auto& [p, d] : members) EXPECT_TRUE(AppendTarMember(&t, p, d.data(), d.size()).ok()) << p;
  AppendTarEnd(&t);
  return t;
}

// A raw ustar header with any name and type (what AppendTarMember refuses to write).
std::string RawTarHeader(const std::string& name, char type, uint64_t size, const std::string& link = "") {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = type;
  std::memcpy(&h[157], link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(&h[257], "ustar", 6);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<uint8_t>(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

TEST(Tar, GroupsSamplesByKeyAndReadsFields) {
  const std::string path = TempPath("s.tar");
  int32_t raw[2] = {7, 8};
  WriteFile(path, TarOf({{"a/s0.cls", "3"}, {"a/s0.bin", std::string(reinterpret_cast<char*>(raw), 8)},
                         {"a/s0.txt", "hello"}, {"a/s1.cls", " 4\n"}, {"a/s1.bin", std::string(8, '\0')},
                         {"a/s1.txt", ""}}));
  std::vector<TarFieldDecl> decls = {{"cls", TarFieldKind::kInt, ElementType::kInt64, {}},
                                     {"bin", TarFieldKind::kRaw, ElementType::kInt32, {2}},
                                     {"txt", TarFieldKind::kBytes, ElementType::kUInt8, {}}};
  auto ds = TarShardDataset::Open({path}, decls);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ(ds.value()->size(), 2u);
  EXPECT_EQ(ds.value()->key(1), "a/s1");
  EXPECT_TRUE(ds.value()->fields()[2].variable);
  uint64_t sizes[3];
  ASSERT_TRUE(ds.value()->SampleBytes(0, sizes).ok());
  EXPECT_EQ(sizes[2], 5u);
  int64_t cls;
  int32_t bin[2];
  char txt[5];
  uint8_t* dst[3] = {reinterpret_cast<uint8_t*>(&cls), reinterpret_cast<uint8_t*>(bin), reinterpret_cast<uint8_t*>(txt)};
  ASSERT_TRUE(ds.value()->Read(0, dst).ok());
  EXPECT_EQ(cls, 3);
  EXPECT_EQ(bin[1], 8);
  EXPECT_EQ(std::string(txt, 5), "hello");
  ASSERT_TRUE(ds.value()->Read(1, dst).ok());
  EXPECT_EQ(cls, 4);
  // Inferred fields: cls -> int, the rest bytes.
  auto inferred = TarShardDataset::Open({path}, {});
  ASSERT_TRUE(inferred.ok());
  ASSERT_EQ(inferred.value()->decls().size(), 3u);
  EXPECT_EQ(inferred.value()->decls()[0].kind, TarFieldKind::kInt);
  EXPECT_EQ(inferred.value()->decls()[1].kind, TarFieldKind::kBytes);
  // A member of the wrong size for its declared shape names shard, sample, member.
  decls[1].shape = {3};
  auto wrong = TarShardDataset::Open({path}, decls);
  ASSERT_TRUE(wrong.ok());
  Status st = wrong.value()->Read(0, dst);
  ASSERT_TRUE(st.IsDataLoss());
  EXPECT_NE(st.message().find("tar shard " + path + ", sample 'a/s0' (index 0): member 'a/s0.bin' has 8 bytes; "
                              "declared int32 (3,) needs 12"), std::string::npos) << st.message();
  std::remove(path.c_str());
}

TEST(Tar, UnsafeMembersLinksAndTruncation) {
  const std::string path = TempPath("bad.tar");
  std::string good = TarOf({{"k.cls", "1"}});
  good.resize(good.size() - 1024);  // drop the end blocks
  std::string evil = RawTarHeader("../evil.cls", '0', 1) + std::string("2") + std::string(511, '\0');
  std::string abs = RawTarHeader("/etc/x.cls", '0', 1) + std::string("3") + std::string(511, '\0');
  std::string link = RawTarHeader("l.cls", '2', 0, "/etc/passwd");
  WriteFile(path, good + evil + abs + link + std::string(1024, '\0'));
  FileReader f = std::move(FileReader::Open(path)).value();
  auto strict = ListTar(f, false);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("tar shard " + path + ", header at byte offset 1024: member "
                                           "'../evil.cls' has a '..' component"), std::string::npos)
      << strict.status().message();
  auto lenient = ListTar(f, true);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient.value().members.size(), 1u);
  ASSERT_EQ(lenient.value().bad.size(), 3u);
  EXPECT_NE(lenient.value().bad[1].find("an absolute path"), std::string::npos);
  EXPECT_NE(lenient.value().bad[2].find("a link (to '/etc/passwd')"), std::string::npos);
  TarShardOptions o;
  o.on_error = OnError::kSkip;
  auto ds = TarShardDataset::Open({path}, {}, o);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds.value()->size(), 1u);
  EXPECT_EQ(ds.value()->skipped(), 3u);
  // Truncated inside a member's data.
  std::string t = TarOf({{"k.bin", std::string(3000, 'x')}});
  WriteFile(path, t.substr(0, 2000));
  FileReader g = std::move(FileReader::Open(path)).value();
  auto cut = ListTar(g, false);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("claims 3000 bytes"), std::string::npos) << cut.status().message();
  // Not a tar file.
  WriteFile(path, std::string(1024, 'z'));
  FileReader h = std::move(FileReader::Open(path)).value();
  auto junk = ListTar(h, false);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("checksum"), std::string::npos);
  // The writer refuses unsafe paths.
  std::string out;
  EXPECT_FALSE(AppendTarMember(&out, "../x", "", 0).ok());
  EXPECT_FALSE(AppendTarMember(&out, "/x", "", 0).ok());
  std::remove(path.c_str());
}

TEST(Tar, SplitKey) {
  std::string k, e;
  SplitTarKey("dir.v1/abc.seg.png", &k, &e);
  EXPECT_EQ(k, "dir.v1/abc");
  EXPECT_EQ(e, "seg.png");
  SplitTarKey("noext", &k, &e);
  EXPECT_EQ(k, "noext");
  EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace stoker
