// text/token_dataset: Megatron .bin/.idx, flat and .npy token files read as
// documents, and the bad inputs named (file, document, byte).
#include "text/token_dataset.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace stoker {
namespace {

std::string TempDir() {
  auto d = std::filesystem::temp_directory_path() / ("token_dataset_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Megatron's writer: uint16 tokens (code 8), one sequence per document.
void WriteMegatron(const std::string& prefix, const std::vector<std::vector<uint16_t>>& docs) {
  std::string bin, idx("MMIDIDX\0\0", 9);
  Put<uint64_t>(&idx, 1);
  idx.push_back(8);
  Put<uint64_t>(&idx, docs.size());
  Put<uint64_t>(&idx, docs.size() + 1);
  for (const auto& d : docs) Put<int32_t>(&idx, static_cast<int32_t>(d.size()));
  int64_t at = 0;
  for (const auto& d : docs) {
    Put<int64_t>(&idx, at);
    at += static_cast<int64_t>(d.size() * 2);
  }
  for (size_t i = 0; i <= docs.size(); ++i) Put<int64_t>(&idx, static_cast<int64_t>(i));
  for (const auto& d : docs)
    for (uint16_t t : d) Put<uint16_t>(&bin, t);
  Write(prefix + ".bin", bin);
  Write(prefix + ".idx", idx);
}

std::vector<int64_t> Doc(TokenDataset& d, uint64_t i) {
  uint64_t bytes = 0;
  EXPECT_TRUE(d.SampleBytes(i, &bytes).ok());
  std::vector<int64_t> out(bytes / 8);
  uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out.data())};
  Status st = d.Read(i, dst);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(TokenDataset, MegatronFlatAndNpyFilesAreOneDatasetOfDocuments) {
  const std::string dir = TempDir();
  WriteMegatron(dir + "/m", {{1, 2, 3}, {}, {65535, 7}});
  std::string flat;  // eos 0: [5 0] [6 6 0] [9]
  for (uint32_t t : {5u, 0u, 6u, 6u, 0u, 9u}) Put<uint32_t>(&flat, t);
  Write(dir + "/f.bin", flat);
  TokenDatasetOptions o;
  o.flat_dtype = "uint32";
  o.eos_id = 0;
  auto d = TokenDataset::Open({dir + "/m", dir + "/f.bin"}, o).value();
  ASSERT_EQ(d->size(), 6u);
  EXPECT_EQ(d->tokens(), 5u + 6u);
  EXPECT_EQ(Doc(*d, 0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(Doc(*d, 1).empty());
  EXPECT_EQ(Doc(*d, 2), (std::vector<int64_t>{65535, 7}));
  EXPECT_EQ(Doc(*d, 4), (std::vector<int64_t>{6, 6, 0}));
  EXPECT_EQ(Doc(*d, 5), (std::vector<int64_t>{9}));
  EXPECT_NE(d->DescribeSample(4).find("document 1 of " + dir + "/f.bin"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(TokenDataset, BadFilesAreNamedWithTheDocumentAndTheByte) {
  const std::string dir = TempDir();
  WriteMegatron(dir + "/m", {{1, 2, 3}, {4, 5}});
  std::filesystem::resize_file(dir + "/m.bin", 8);  // 10 bytes of tokens, 8 left
  auto r = TokenDataset::Open({dir + "/m.bin"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir + "/m.bin ends at byte 8, and document 1 of " + dir + "/m.idx ends at byte 10"),
            std::string::npos) << r.status().message();
  WriteMegatron(dir + "/m", {{1, 2, 3}, {4, 5}});
  std::string idx;
  {
    std::ifstream in(dir + "/m.idx", std::ios::binary);
    idx.assign(std::istreambuf_iterator<char>(in), {});
  }
  const int64_t wrong = 4;  // document 1's offset: 6 is right
  std::memcpy(idx.data() + 34 + 2 * 4 + 8, &wrong, 8);
  Write(dir + "/m.idx", idx);
  r = TokenDataset::Open({dir + "/m.idx"}, {});
  EXPECT_NE(r.status().message().find("document 1 has 2 tokens at byte 4, where the documents before it end at byte 6"),
            std::string::npos) << r.status().message();
  std::string bad("MMIDIDX\0\0", 9);
  Put<uint64_t>(&bad, 2);
  Write(dir + "/m.idx", bad + std::string(17, '\0'));
  EXPECT_NE(TokenDataset::Open({dir + "/m"}, {}).status().message().find("index version 2"), std::string::npos);
  bad = std::string("MMIDIDX\0\0", 9);
  Put<uint64_t>(&bad, 1);
  Write(dir + "/m.idx", bad + std::string(17, '\0'));
  EXPECT_NE(TokenDataset::Open({dir + "/m"}, {}).status().message().find("dtype code 0"), std::string::npos);
  Write(dir + "/m.idx", "not an index at all, really not: a text file of some length");
  EXPECT_NE(TokenDataset::Open({dir + "/m"}, {}).status().message().find("not an indexed dataset's .idx"),
            std::string::npos);
  Write(dir + "/odd.bin", std::string(5, '\1'));
  TokenDatasetOptions o;
  EXPECT_NE(TokenDataset::Open({dir + "/odd.bin"}, o).status().message().find("say its dtype"), std::string::npos);
  o.flat_dtype = "uint16";
  EXPECT_NE(TokenDataset::Open({dir + "/odd.bin"}, o).status().message().find("not a whole number of uint16 tokens"),
            std::string::npos);
  // A token outside the vocabulary: DataLoss naming the document and byte.
  WriteMegatron(dir + "/v", {{1, 2}, {3, 900, 4}});
  o.vocab_size = 512;
  auto d = TokenDataset::Open({dir + "/v"}, o).value();
  std::vector<int64_t> out(3);
  uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out.data())};
  Status st = d->Read(1, dst);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("token 900 at token 1 of document 1 of " + dir + "/v.bin (byte 6) is outside the "
                              "vocabulary (vocab_size=512)"), std::string::npos) << st.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
