// Reads a raw file of fixed-size records through stoker::Loader (reader
// threads or, with --processes, worker processes) and checks every batch
// against the file read directly: a plain C++ program, no Python, no torch.
//
//   checksum FILE RECORD_BYTES [--processes] [--batch N] [--workers N]
//   checksum --make FILE RECORDS RECORD_BYTES    (writes a test file)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "stoker/loader.h"

namespace {

uint64_t Fnv1a(const void* data, uint64_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int Fail(const stoker::Status& st) {
  std::fprintf(stderr, "checksum: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--make") {
    const uint64_t n = std::stoull(argv[3]), rec = std::stoull(argv[4]);
    std::ofstream out(argv[2], std::ios::binary);
    std::vector<uint8_t> r(rec);
    for (uint64_t i = 0; i < n; ++i) {
      for (uint64_t k = 0; k < rec; ++k) r[k] = static_cast<uint8_t>((i * 131 + k * 7) & 0xff);
      out.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(rec));
    }
    return out ? 0 : 1;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: checksum FILE RECORD_BYTES [--processes] [--batch N] [--workers N]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int64_t rec = std::stoll(argv[2]);
  stoker::LoaderOptions o;
  o.batch_size = 16;
  o.num_workers = 2;
  o.seeded_shuffle = true;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--processes") o.use_processes = true;
    else if (a == "--batch" && i + 1 < argc) o.batch_size = std::stoull(argv[++i]);
    else if (a == "--workers" && i + 1 < argc) o.num_workers = static_cast<uint32_t>(std::stoul(argv[++i]));
  }
  auto ds = stoker::OpenRaw(path, stoker::ElementType::kUInt8, {rec});
  if (!ds.ok()) return Fail(ds.status());
  auto loader = stoker::Loader::Create(ds.value(), o);
  if (!loader.ok()) return Fail(loader.status());

  // The expected checksum of each record, straight from the file.
  std::ifstream in(path, std::ios::binary);
  std::vector<uint64_t> want(ds.value()->size());
  std::vector<uint8_t> r(static_cast<size_t>(rec));
  for (uint64_t& w : want) {
    in.read(reinterpret_cast<char*>(r.data()), rec);
    w = Fnv1a(r.data(), r.size());
  }
  std::vector<int> seen(want.size(), 0);
  uint64_t batches = 0, bytes = 0;
  for (const stoker::Batch& b : *loader.value()) {
    const stoker::TensorView& t = b[0];
    if (t.shape.size() != 2 || t.shape[1] != rec) {
      std::fprintf(stderr, "checksum: batch %llu has a wrong shape\n", static_cast<unsigned long long>(b.id()));
      return 1;
    }
    // Records are identified by content: find which one each is.
    for (int64_t k = 0; k < t.shape[0]; ++k) {
      const uint64_t h = Fnv1a(t.as<uint8_t>() + k * rec, static_cast<uint64_t>(rec));
      bool found = false;
      for (size_t i = 0; i < want.size() && !found; ++i)
        if (want[i] == h && !seen[i]) seen[i] = 1, found = true;
      if (!found) {
        std::fprintf(stderr, "checksum: batch %llu sample %lld matches no unread record\n",
                     static_cast<unsigned long long>(b.id()), static_cast<long long>(k));
        return 1;
      }
    }
    ++batches;
    bytes += b.nbytes();
  }
  if (!loader.value()->status().ok()) return Fail(loader.value()->status());
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) {
      std::fprintf(stderr, "checksum: record %zu never arrived\n", i);
      return 1;
    }
  std::printf("checksum ok: %zu records in %llu batches, %llu bytes (%s)\n", seen.size(),
              static_cast<unsigned long long>(batches), static_cast<unsigned long long>(bytes),
              o.use_processes ? "worker processes" : "reader threads");
  return 0;
}
