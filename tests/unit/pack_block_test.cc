// text/pack_block: a block of tokenized documents in memory packed into the
// same fields as a token file's Pack: tokens, next-token labels across a
// sequence's end, -100 at a document's end and on padding, positions per
// piece, the documents' ids, and each sequence's cu_seqlens.
#include "text/pack_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace stoker {
namespace {

struct Packed {
  std::vector<int64_t> ids, labels, pos, docs, cu_first;
  std::vector<int32_t> cu;
};

Packed Fill(const BlockPacker& b, uint32_t seq_len, int64_t pad) {
  Packed p;
  const size_t n = b.sequences() * seq_len;
  p.ids.resize(n);
  p.labels.resize(n);
  p.pos.resize(n);
  p.docs.resize(n);
  p.cu.resize(b.cu_entries());
  p.cu_first.resize(b.sequences() + 1);
  EXPECT_TRUE(b.Fill(pad, p.ids.data(), p.labels.data(), p.pos.data(), p.docs.data(), p.cu.data(),
                     p.cu_first.data())
                  .ok());
  return p;
}

TEST(BlockPacker, ConcatCarriesADocumentIntoTheNextSequenceWithItsTrueNextLabel) {
  // Documents 70 (tokens 1 2 3), 71 (4 5 6 7 8), 72 (empty), 73 (9).
  const std::vector<int64_t> tokens{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<uint64_t> starts{0, 3, 8, 8, 9};
  const std::vector<int64_t> ids{70, 71, 72, 73};
  BlockPacker b = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 4, {4, PackMode::kConcat, 1}).value();
  ASSERT_EQ(b.sequences(), 3u);
  EXPECT_EQ(b.tokens(), 9u);
  Packed p = Fill(b, 4, -7);
  EXPECT_EQ(p.ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, -7, -7, -7}));
  EXPECT_EQ(p.labels, (std::vector<int64_t>{2, 3, -100, 5, 6, 7, 8, -100, -100, -100, -100, -100}));
  EXPECT_EQ(p.pos, (std::vector<int64_t>{0, 1, 2, 0, 0, 1, 2, 3, 0, 0, 1, 2}));
  EXPECT_EQ(p.docs, (std::vector<int64_t>{70, 70, 70, 71, 71, 71, 71, 71, 73, -1, -1, -1}));
  EXPECT_EQ(p.cu, (std::vector<int32_t>{0, 3, 4, 0, 4, 0, 1, 4}));
  EXPECT_EQ(p.cu_first, (std::vector<int64_t>{0, 3, 5, 8}));
}

TEST(BlockPacker, BestFitKeepsDocumentsWholeAndRefusesBadOffsets) {
  const std::vector<int64_t> tokens{1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3};
  const std::vector<uint64_t> starts{0, 3, 5, 12};  // 3, 2 and 7 tokens
  const std::vector<int64_t> ids{5, 6, 7};
  BlockPacker b = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 3, {5, PackMode::kBestFit, 4}).value();
  Packed p = Fill(b, 5, 0);
  // Document 7 (7 tokens) is a whole sequence and a rest; 5 and 6 fill one.
  ASSERT_EQ(b.sequences(), 3u);
  EXPECT_EQ(std::vector<int64_t>(p.docs.begin(), p.docs.begin() + 5), (std::vector<int64_t>{5, 5, 5, 6, 6}));
  EXPECT_EQ(std::vector<int64_t>(p.docs.begin() + 5, p.docs.begin() + 10), (std::vector<int64_t>{7, 7, 7, 7, 7}));
  EXPECT_EQ(p.labels[9], 3);  // (document 7 goes on in the next sequence)
  EXPECT_EQ(std::vector<int64_t>(p.docs.begin() + 10, p.docs.end()), (std::vector<int64_t>{7, 7, -1, -1, -1}));
  const std::vector<uint64_t> backwards{0, 5, 3, 12};
  EXPECT_FALSE(BlockPacker::Make(tokens.data(), backwards.data(), ids.data(), 3, {5, PackMode::kConcat, 1}).ok());
  EXPECT_FALSE(BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 3, {0, PackMode::kConcat, 1}).ok());
  // No documents: no sequences.
  BlockPacker none = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 0, {5, PackMode::kBestFit, 4}).value();
  EXPECT_EQ(none.sequences(), 0u);
}

TEST(BlockPacker, LongestFirstPadsLessAndAShuffledOrderHoldsTheSameSequences) {
  // Lengths 2, 2, 2, 6, 6, 6 into sequences of 8: in order best fit needs 4
  // sequences (the 2s share one); longest first, 3 (6 + 2 each, no padding).
  const std::vector<uint32_t> lengths{2, 2, 2, 6, 6, 6};
  std::vector<uint64_t> starts{0};
  std::vector<int64_t> tokens, ids;
  for (size_t d = 0; d < lengths.size(); ++d) {
    for (uint32_t k = 0; k < lengths[d]; ++k) tokens.push_back(static_cast<int64_t>(100 * d + k));
    starts.push_back(tokens.size());
    ids.push_back(static_cast<int64_t>(d));
  }
  BlockPackOptions o{8, PackMode::kBestFit, 16};
  BlockPacker in_order = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 6, o).value();
  o.longest_first = true;
  BlockPacker longest = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 6, o).value();
  EXPECT_EQ(in_order.sequences(), 4u);
  ASSERT_EQ(longest.sequences(), 3u);
  EXPECT_EQ(longest.tokens(), 24u);
  o.shuffle_key = 12345;
  BlockPacker shuffled = BlockPacker::Make(tokens.data(), starts.data(), ids.data(), 6, o).value();
  Packed a = Fill(longest, 8, 0), b = Fill(shuffled, 8, 0);
  // The same rows, each with its own cu_seqlens, in another order.
  std::vector<std::vector<int64_t>> rows_a, rows_b;
  bool moved = false;
  for (uint64_t r = 0; r < 3; ++r) {
    std::vector<int64_t> row_a(a.ids.begin() + r * 8, a.ids.begin() + (r + 1) * 8);
    std::vector<int64_t> row_b(b.ids.begin() + r * 8, b.ids.begin() + (r + 1) * 8);
    moved |= row_a != row_b;
    for (int64_t k = b.cu_first[r]; k < b.cu_first[r + 1]; ++k) row_b.push_back(1000 + b.cu[k]);
    for (int64_t k = a.cu_first[r]; k < a.cu_first[r + 1]; ++k) row_a.push_back(1000 + a.cu[k]);
    rows_a.push_back(row_a);
    rows_b.push_back(row_b);
  }
  EXPECT_TRUE(moved);
  std::sort(rows_a.begin(), rows_a.end());
  std::sort(rows_b.begin(), rows_b.end());
  EXPECT_EQ(rows_a, rows_b);
}

}  // namespace
}  // namespace stoker
