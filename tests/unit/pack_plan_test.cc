// text/pack_plan: concat cuts one stream every seq_len tokens; best_fit keeps
// documents whole within a window of open sequences; both place every token
// of every document exactly once.
#include "text/pack_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace stoker {
namespace {

// Every token (doc, offset) in exactly one piece, sequences within seq_len.
void CheckCoverage(const PackPlan& plan, const std::vector<uint32_t>& len, const std::vector<uint64_t>& docs,
                   uint32_t seq_len) {
  std::map<uint64_t, std::vector<int>> seen;
  for (uint64_t d : docs) seen[d].assign(len[d], 0);
  for (uint64_t s = 0; s < plan.sequences(); ++s) {
    uint64_t used = 0;
    for (uint64_t p = plan.first[s]; p < plan.first[s + 1]; ++p) {
      const PackPiece& piece = plan.pieces[p];
      ASSERT_GT(piece.length, 0u);
      for (uint32_t k = 0; k < piece.length; ++k) ++seen[piece.doc].at(piece.offset + k);
      used += piece.length;
    }
    ASSERT_LE(used, seq_len) << "sequence " << s;
  }
  uint64_t tokens = 0;
  for (auto& [d, marks] : seen)
    for (size_t k = 0; k < marks.size(); ++k) {
      ASSERT_EQ(marks[k], 1) << "document " << d << " token " << k;
      ++tokens;
    }
  EXPECT_EQ(plan.tokens, tokens);
}

TEST(PackPlan, ConcatCutsOneStreamWithPaddingOnlyAtTheEnd) {
  std::vector<uint32_t> len{5, 0, 9, 3, 14, 1};
  std::vector<uint64_t> docs{4, 0, 1, 2, 3, 5};
  PackPlan plan = MakePackPlan(docs, [&](uint64_t d) { return len[d]; }, 8, PackMode::kConcat, 0).value();
  CheckCoverage(plan, len, docs, 8);
  ASSERT_EQ(plan.sequences(), 4u);  // 32 tokens: 4 full sequences of 8
  // [4:0-8] [4:8-14 0:0-2] [0:2-5 2:0-5] [2:5-9 3:0-3 5:0-1]
  EXPECT_EQ(plan.first, (std::vector<uint64_t>{0, 1, 3, 5, 8}));
  EXPECT_EQ(plan.pieces[3].doc, 0u);
  EXPECT_EQ(plan.pieces[3].offset, 2u);
  EXPECT_EQ(plan.pieces[3].length, 3u);
  len.push_back(3);  // 3 tokens more: a fifth sequence, padded
  docs.push_back(6);
  PackPlan more = MakePackPlan(docs, [&](uint64_t d) { return len[d]; }, 8, PackMode::kConcat, 0).value();
  CheckCoverage(more, len, docs, 8);
  EXPECT_EQ(more.sequences(), 5u);
}

TEST(PackPlan, BestFitKeepsDocumentsWholeAndPadsLittle) {
  std::mt19937_64 rng(4);
  std::vector<uint32_t> len(5000);
  std::vector<uint64_t> docs(len.size());
  for (size_t i = 0; i < len.size(); ++i) {
    len[i] = static_cast<uint32_t>(1 + rng() % 700);
    docs[i] = i;
  }
  len[17] = 2600;  // longer than seq_len: cut into whole sequences and a rest
  PackPlan plan = MakePackPlan(docs, [&](uint64_t d) { return len[d]; }, 1024, PackMode::kBestFit, 64).value();
  CheckCoverage(plan, len, docs, 1024);
  std::map<uint64_t, int> pieces;
  for (const PackPiece& p : plan.pieces) ++pieces[p.doc];
  for (const auto& [d, n] : pieces) EXPECT_EQ(n, d == 17 ? 3 : 1) << "document " << d << " was split";
  const double padding = 1.0 - static_cast<double>(plan.tokens) / (1024.0 * plan.sequences());
  EXPECT_LT(padding, 0.02);
  // A window of one is next-fit: a sequence closes when the next document does not fit.
  PackPlan one = MakePackPlan(docs, [&](uint64_t d) { return len[d]; }, 1024, PackMode::kBestFit, 1).value();
  CheckCoverage(one, len, docs, 1024);
  EXPECT_GT(one.sequences(), plan.sequences());
  EXPECT_FALSE(MakePackPlan(docs, [&](uint64_t d) { return len[d]; }, 0, PackMode::kConcat, 1).ok());
}

}  // namespace
}  // namespace stoker
