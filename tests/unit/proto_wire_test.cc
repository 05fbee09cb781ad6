// io/proto_wire: the wire format read and written by hand, checked against
// the protobuf library in both directions (random tf.train.Examples written
// by one and read by the other), and refusing what is not wire format.
#include "io/proto_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "example.pb.h"
#include "io/example_decoder.h"
#include "io/tfrecord_writer.h"

#include <google/protobuf/io/coded_stream.h>

namespace stoker {
namespace {

wire::Reader ReaderOf(const std::string& s) { return wire::Reader(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(ProtoWire, VarintsMatchProtobuf) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{300}, uint64_t{1} << 32,
                     (uint64_t{1} << 63) - 1, static_cast<uint64_t>(int64_t{-1}), UINT64_MAX}) {
    std::string mine;
    wire::PutVarint(&mine, v);
    EXPECT_EQ(mine.size(), wire::VarintSize(v));
    EXPECT_EQ(wire::VarintSize(v), google::protobuf::io::CodedOutputStream::VarintSize64(v)) << v;
    uint8_t theirs[10];
    const uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, theirs);
    EXPECT_EQ(mine, std::string(reinterpret_cast<char*>(theirs), end - theirs)) << v;
    wire::Reader r = ReaderOf(mine);
    uint64_t back = 0;
    ASSERT_TRUE(r.Varint(&back));
    EXPECT_EQ(back, v);
    EXPECT_EQ(r.left(), 0u);
  }
}

TEST(ProtoWire, RefusesWhatIsNotWireFormat) {
  auto fails = [](const std::string& bytes) {
    wire::Reader r = ReaderOf(bytes);
    uint32_t field;
    wire::WireType type;
    while (r.Next(&field, &type))
      if (!r.Skip(field, type)) break;
    return r.failed();
  };
  EXPECT_FALSE(fails(""));
  EXPECT_FALSE(fails(std::string("\x08\x96\x01", 3)));                      // field 1 = 150
  EXPECT_FALSE(fails(std::string("\x0b\x08\x01\x0c", 4)));                  // group 1 { field 1 = 1 }
  EXPECT_TRUE(fails(std::string("\x08\x96", 2)));                          // varint cut short
  EXPECT_TRUE(fails(std::string("\x08") + std::string(10, '\xff') + "\x01"));  // 11-byte varint
  EXPECT_TRUE(fails(std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11)));  // past 64 bits
  EXPECT_TRUE(fails(std::string("\x0a\x05" "abc", 5)));                    // length past the end
  EXPECT_TRUE(fails(std::string("\x00\x01", 2)));                          // field number 0
  EXPECT_TRUE(fails(std::string("\x0e\x01", 2)));                          // wire type 6
  EXPECT_TRUE(fails(std::string("\x0f\x01", 2)));                          // wire type 7
  EXPECT_TRUE(fails(std::string("\x0c", 1)));                              // end of a group never opened
  EXPECT_TRUE(fails(std::string("\x0b\x08\x01", 3)));                      // group never closed
  EXPECT_TRUE(fails(std::string("\x0b\x14", 2)));                          // group 1 closed as group 2
  EXPECT_TRUE(fails(std::string("\x0d\x01\x02", 3)));                      // fixed32 cut short
  EXPECT_TRUE(fails(std::string("\x09\x01\x02\x03\x04", 5)));              // fixed64 cut short
  std::string deep;
  for (int i = 0; i < 10; ++i) deep += "\x0b";
  for (int i = 0; i < 10; ++i) deep += "\x0c";
  EXPECT_TRUE(fails(deep));  // groups nested past 8
}

// A random Example: up to 6 features of each kind, values at the edges.
struct RandomFeature {
  std::string name;
  FeatureValue::Kind kind;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> bytes;
};

std::vector<RandomFeature> MakeRandom(std::mt19937_64& rng) {
  std::vector<RandomFeature> out(rng() % 7);
  for (size_t i = 0; i < out.size(); ++i) {
    RandomFeature& f = out[i];
    f.name = "feature_" + std::to_string(i) + std::string(rng() % 200, 'k');  // keys over 127 bytes too
    f.kind = static_cast<FeatureValue::Kind>(rng() % 3);
    const size_t n = rng() % 3 == 0 ? 0 : rng() % 300;
    for (size_t k = 0; k < n; ++k) {
      if (f.kind == FeatureValue::Kind::kFloat) f.floats.push_back(std::uniform_real_distribution<float>(-1e6, 1e6)(rng));
      if (f.kind == FeatureValue::Kind::kInt64) {
        const int64_t edges[] = {0, -1, 1, INT64_MIN, INT64_MAX, 127, 128, -128};
        f.ints.push_back(rng() % 2 ? edges[rng() % 8] : static_cast<int64_t>(rng()));
      }
      if (f.kind == FeatureValue::Kind::kBytes) f.bytes.push_back(std::string(rng() % 150, static_cast<char>(rng())));
    }
  }
  return out;
}

TEST(ProtoWire, ExamplesRoundTripThroughProtobufBothWays) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const std::vector<RandomFeature> fs = MakeRandom(rng);
    // stoker writes, protobuf reads.
    std::vector<FeatureValue> values;
    for (const RandomFeature& f : fs) {
      FeatureValue v;
      v.name = f.name, v.kind = f.kind;
      v.floats = f.floats.data(), v.ints = f.ints.data();
      for (const std::string& b : f.bytes) v.bytes.push_back(b);
      v.count = f.kind == FeatureValue::Kind::kFloat ? f.floats.size()
                : f.kind == FeatureValue::Kind::kInt64 ? f.ints.size() : f.bytes.size();
      values.push_back(v);
    }
    auto mine = SerializeExample(values);
    ASSERT_TRUE(mine.ok()) << mine.status().ToString();
    tf::Example parsed;
    ASSERT_TRUE(parsed.ParseFromString(mine.value())) << "round " << round;
    ASSERT_EQ(parsed.features().feature_size(), static_cast<int>(fs.size()));
    // protobuf writes, stoker reads (the decoder takes each list as bytes:
    // they must equal the values exactly).
    tf::Example theirs;
    for (const RandomFeature& f : fs) {
      const tf::Feature& p = parsed.features().feature().at(f.name);
      tf::Feature& t = (*theirs.mutable_features()->mutable_feature())[f.name];
      switch (f.kind) {
        case FeatureValue::Kind::kFloat:
          ASSERT_EQ(p.kind_case(), tf::Feature::kFloatList);
          ASSERT_EQ(std::vector<float>(p.float_list().value().begin(), p.float_list().value().end()), f.floats);
          t.mutable_float_list()->mutable_value()->Add(f.floats.begin(), f.floats.end());
          break;
        case FeatureValue::Kind::kInt64:
          ASSERT_EQ(p.kind_case(), tf::Feature::kInt64List);
          ASSERT_EQ(std::vector<int64_t>(p.int64_list().value().begin(), p.int64_list().value().end()), f.ints);
          t.mutable_int64_list()->mutable_value()->Add(f.ints.begin(), f.ints.end());
          break;
        case FeatureValue::Kind::kBytes:
          ASSERT_EQ(p.kind_case(), tf::Feature::kBytesList);
          ASSERT_EQ(std::vector<std::string>(p.bytes_list().value().begin(), p.bytes_list().value().end()), f.bytes);
          t.mutable_bytes_list();  // (set even when empty)
          for (const std::string& b : f.bytes) t.mutable_bytes_list()->add_value(b);
          break;
      }
    }
    std::string rec;
    ASSERT_TRUE(theirs.SerializeToString(&rec));
    std::vector<FieldSpec> specs;
    for (const RandomFeature& f : fs) {
      if (f.kind == FeatureValue::Kind::kFloat) specs.push_back({f.name, ElementType::kFloat32, {static_cast<int64_t>(f.floats.size())}});
      if (f.kind == FeatureValue::Kind::kInt64) specs.push_back({f.name, ElementType::kInt64, {static_cast<int64_t>(f.ints.size())}});
      if (f.kind == FeatureValue::Kind::kBytes) {
        size_t n = 0;
        for (const std::string& b : f.bytes) n += b.size();
        specs.push_back({f.name, ElementType::kUInt8, {static_cast<int64_t>(n)}});
      }
    }
    std::vector<std::string> out;
    std::vector<uint8_t*> dst;
    for (const FieldSpec& s : specs) out.emplace_back(s.bytes(), '\0');
    for (std::string& b : out) dst.push_back(reinterpret_cast<uint8_t*>(b.data()));
    Status st = ExampleDecoder(specs).Decode(reinterpret_cast<const uint8_t*>(rec.data()), rec.size(), dst.data());
    ASSERT_TRUE(st.ok()) << "round " << round << ": " << st.ToString();
    for (size_t i = 0; i < fs.size(); ++i) {
      const RandomFeature& f = fs[i];
      // (an empty list's data() may be null, which memcmp may not be given)
      if (f.kind == FeatureValue::Kind::kFloat && !f.floats.empty())
        EXPECT_EQ(0, std::memcmp(out[i].data(), f.floats.data(), 4 * f.floats.size()));
      if (f.kind == FeatureValue::Kind::kInt64 && !f.ints.empty())
        EXPECT_EQ(0, std::memcmp(out[i].data(), f.ints.data(), 8 * f.ints.size()));
      if (f.kind == FeatureValue::Kind::kBytes) {
        std::string all;
        for (const std::string& b : f.bytes) all += b;
        EXPECT_EQ(out[i], all);
      }
    }
  }
}

TEST(ProtoWire, DecoderSkipsUnknownFieldsAsProtobufDoes) {
  // An Example with unknown fields of every wire type, at every level.
  tf::Example ex;
  (*ex.mutable_features()->mutable_feature())["x"].mutable_int64_list()->add_value(-5);
  std::string rec;
  ASSERT_TRUE(ex.SerializeToString(&rec));
  const std::string unknown = std::string("\xa8\x06\x05", 3) + std::string("\xa9\x06", 2) + std::string(8, '\1') +
                              std::string("\xaa\x06\x02zz", 5) + std::string("\xab\x06\xa8\x06\x01\xac\x06", 7) +
                              std::string("\xad\x06", 2) + std::string(4, '\2');
  const std::string with_unknown = unknown + rec + unknown;
  tf::Example back;
  ASSERT_TRUE(back.ParseFromString(with_unknown));  // (protobuf accepts it)
  std::string out(8, '\0');
  uint8_t* dst[] = {reinterpret_cast<uint8_t*>(out.data())};
  Status st = ExampleDecoder({{"x", ElementType::kInt64, {1}}})
                  .Decode(reinterpret_cast<const uint8_t*>(with_unknown.data()), with_unknown.size(), dst);
  ASSERT_TRUE(st.ok()) << st.ToString();
  int64_t v;
  std::memcpy(&v, out.data(), 8);
  EXPECT_EQ(v, -5);
}

}  // namespace
}  // namespace stoker
