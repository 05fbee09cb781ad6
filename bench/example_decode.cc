// Decoding one small tf.train.Example (16 floats, an int64, 64 bytes, and 8
// features it does not ask for): ns per record.  bench/example_decode_ab.sh
// builds it twice, with the ExampleDecoder of a git revision and of the work
// tree, to compare the two.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include "example.pb.h"  // (protobuf writes the record)
#include "io/example_decoder.h"
int main() {
  stoker::tf::Example ex;
  auto& m = *ex.mutable_features()->mutable_feature();
  for (int i = 0; i < 16; ++i) m["x"].mutable_float_list()->add_value(i * 0.5f);
  m["y"].mutable_int64_list()->add_value(7);
  m["b"].mutable_bytes_list()->add_value(std::string(64, 'q'));
  for (int i = 0; i < 8; ++i) m["other" + std::to_string(i)].mutable_int64_list()->add_value(i);
  std::string rec; ex.SerializeToString(&rec);
  std::vector<stoker::FieldSpec> specs = {{"x", stoker::ElementType::kFloat32, {16}}, {"y", stoker::ElementType::kInt64, {}}, {"b", stoker::ElementType::kUInt8, {64}}};
  std::vector<std::string> out; std::vector<uint8_t*> dst;
  for (auto& f : specs) out.emplace_back(f.bytes(), '\0');
  for (auto& b : out) dst.push_back((uint8_t*)b.data());
  stoker::ExampleDecoder d(specs);
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    const int n = 2000000;
    for (int i = 0; i < n; ++i) if (!d.Decode((const uint8_t*)rec.data(), rec.size(), dst.data()).ok()) return 1;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("%s: %.1f ns per record (%zu bytes)\n", NAME, s / n * 1e9, rec.size());
  }
}
