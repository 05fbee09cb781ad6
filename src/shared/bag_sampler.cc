#include "stoker/bag_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "shared/bag_sampler_testing.h"
#include "shared/robust_mutex.h"
#include "shared/shared_block.h"
#include "shared/shared_layouts.h"

namespace stoker {

namespace testing {
void (*g_bag_sampler_mid_draw)() = nullptr;
}  // namespace testing

namespace {

uint64_t Align64(uint64_t v) { return (v + 63) / 64 * 64; }

// splitmix64: a small, well-mixed generator; one per draw, seeded with
// (seed, draw number).
struct SplitMix {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

std::string BagName(uint32_t i) { return "bag " + std::to_string(i); }

}  // namespace

BagSampler::BagSampler(std::shared_ptr<SharedBlock> b)
    : block_(std::move(b)), h_(reinterpret_cast<BagSamplerHeader*>(block_->data())) {}

BagState* BagSampler::bag(uint32_t i) const {
  return reinterpret_cast<BagState*>(block_->data() + h_->bags_at) + i;
}
double* BagSampler::weights() const { return reinterpret_cast<double*>(block_->data() + h_->weights_at); }
uint8_t* BagSampler::available() const { return block_->data() + h_->avail_at; }
int64_t* BagSampler::journal(uint32_t i) const {
  return reinterpret_cast<int64_t*>(block_->data() + h_->journal_at) + uint64_t{i} * h_->k;
}
uint32_t BagSampler::num_bags() const { return h_->num_bags; }
uint32_t BagSampler::k() const { return h_->k; }
uint32_t BagSampler::bag_size(uint32_t i) const { return i < h_->num_bags ? bag(i)->size : 0; }
uint64_t BagSampler::draws() const {
  uint64_t n = 0;  // racy by a draw or two while others draw: a statistic
  for (uint32_t i = 0; i < h_->num_bags; ++i) n += bag(i)->draws;
  return n;
}
uint64_t BagSampler::recoveries() const { return h_->recoveries.load(std::memory_order_relaxed); }

Result<std::shared_ptr<BagSampler>> BagSampler::Create(const std::vector<uint32_t>& bag_sizes, uint32_t k,
                                                       const std::vector<double>& w, OnExhausted on_exhausted,
                                                       uint64_t seed) {
  if (bag_sizes.empty()) return Status::InvalidArgument("BagSampler needs at least one bag");
  if (k == 0) return Status::InvalidArgument("BagSampler: k must be at least 1");
  uint64_t total = 0;
  for (size_t i = 0; i < bag_sizes.size(); ++i) {
    if (bag_sizes[i] == 0) return Status::InvalidArgument("BagSampler: " + BagName(i) + " has no instances");
    if (on_exhausted != OnExhausted::kFewer && bag_sizes[i] < k)
      return Status::InvalidArgument("BagSampler: " + BagName(i) + " has " + std::to_string(bag_sizes[i]) +
                                     " instances, fewer than k=" + std::to_string(k) +
                                     "; use on_exhausted=\"fewer\" or a smaller k");
    total += bag_sizes[i];
  }
  if (!w.empty() && w.size() != total)
    return Status::InvalidArgument("BagSampler: " + std::to_string(w.size()) + " weights for " +
                                   std::to_string(total) + " instances");
  for (size_t i = 0; i < w.size(); ++i)
    if (!(w[i] >= 0) || !std::isfinite(w[i]))
      return Status::InvalidArgument("BagSampler: weight " + std::to_string(i) + " is " + std::to_string(w[i]) +
                                     "; weights must be finite and >= 0");
  const uint64_t n = bag_sizes.size();
  BagSamplerHeader proto{};
  proto.bags_at = Align64(sizeof(BagSamplerHeader));
  proto.weights_at = Align64(proto.bags_at + n * sizeof(BagState));
  proto.avail_at = Align64(proto.weights_at + total * sizeof(double));
  proto.journal_at = Align64(proto.avail_at + total);
  const uint64_t size = proto.journal_at + n * k * sizeof(int64_t);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<SharedBlock> b, SharedBlock::Create(size, "stoker-bagsampler"));
  auto* h = new (b->data()) BagSamplerHeader();
  h->num_bags = static_cast<uint32_t>(n);
  h->k = k;
  h->on_exhausted = static_cast<uint32_t>(on_exhausted);
  h->total = total;
  h->seed = seed;
  h->bags_at = proto.bags_at;
  h->weights_at = proto.weights_at;
  h->avail_at = proto.avail_at;
  h->journal_at = proto.journal_at;
  std::shared_ptr<BagSampler> s(new BagSampler(std::move(b)));
  uint64_t first = 0;
  for (uint32_t i = 0; i < n; ++i) {
    BagState* bs = new (s->bag(i)) BagState();
    STOKER_RETURN_IF_ERROR(InitRobustMutex(&bs->mutex, /*recursive=*/false));
    bs->first = first;
    bs->size = bag_sizes[i];
    first += bag_sizes[i];
  }
  for (uint64_t j = 0; j < total; ++j) {
    s->weights()[j] = w.empty() ? 1.0 : w[j];
    s->available()[j] = 1;
  }
  for (uint32_t i = 0; i < n; ++i) {
    BagState* bs = s->bag(i);
    for (uint32_t j = 0; j < bs->size; ++j) bs->remaining += s->weights()[bs->first + j] > 0;
  }
  h->magic = kBagMagic;
  return s;
}

Result<std::shared_ptr<BagSampler>> BagSampler::Open(std::shared_ptr<SharedBlock> block) {
  auto* h = reinterpret_cast<BagSamplerHeader*>(block->data());
  if (block->size() < sizeof(BagSamplerHeader) || h->magic != kBagMagic || block->sealed() ||
      h->journal_at + uint64_t{h->num_bags} * h->k * sizeof(int64_t) > block->size())
    return Status::InvalidArgument("shared block is not a stoker BagSampler");
  return std::shared_ptr<BagSampler>(new BagSampler(std::move(block)));
}

void BagSampler::NewCycle(uint32_t i) {
  BagState* b = bag(i);
  uint8_t* av = available() + b->first;
  const double* w = weights() + b->first;
  uint32_t remaining = 0;
  for (uint32_t j = 0; j < b->size; ++j) {
    av[j] = 1;
    remaining += w[j] > 0;
  }
  b->remaining = remaining;
}

void BagSampler::StartCycle(uint32_t i) {
  BagState* b = bag(i);
  b->journal_cycle = b->cycle + 1;
  b->journal = static_cast<uint32_t>(BagJournal::kNewCycle);
  b->cycle = b->journal_cycle;
  NewCycle(i);
  b->journal = static_cast<uint32_t>(BagJournal::kIdle);
}

Status BagSampler::LockBag(uint32_t i) {
  if (i >= h_->num_bags)
    return Status::InvalidArgument("BagSampler: no bag " + std::to_string(i) + " (there are " +
                                   std::to_string(h_->num_bags) + ")");
  BagState* b = bag(i);
  bool died = false;
  STOKER_RETURN_IF_ERROR(LockRobustMutex(&b->mutex, -1, &died));
  if (!died) return Status::OK();
  // Its previous drawer died holding it: finish or undo what it was doing.
  const auto j = static_cast<BagJournal>(b->journal);
  if (j == BagJournal::kNewCycle) {
    b->cycle = b->journal_cycle;
    NewCycle(i);
  } else if (j == BagJournal::kTaking) {
    const int64_t* picks = journal(i);
    for (uint32_t p = 0; p < b->journal_n && p < h_->k; ++p)
      if (picks[p] >= 0 && picks[p] < b->size) available()[b->first + picks[p]] = 1;
  }
  // Recount in every case: the dead process may have been anywhere.
  uint32_t remaining = 0;
  for (uint32_t p = 0; p < b->size; ++p)
    remaining += available()[b->first + p] && weights()[b->first + p] > 0;
  b->remaining = remaining;
  b->journal = static_cast<uint32_t>(BagJournal::kIdle);
  h_->recoveries.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

void BagSampler::UnlockBag(uint32_t i) { (void)UnlockRobustMutex(&bag(i)->mutex); }

Status BagSampler::Draw(uint32_t i, std::vector<int64_t>* out, uint64_t* cycle) {
  out->clear();
  STOKER_RETURN_IF_ERROR(LockBag(i));
  BagState* b = bag(i);
  const uint32_t k = h_->k;
  const auto mode = static_cast<OnExhausted>(h_->on_exhausted);
  if (b->remaining < k) {
    const bool restart = mode == OnExhausted::kReset || (mode == OnExhausted::kFewer && b->remaining == 0);
    if (mode == OnExhausted::kError) {
      const uint32_t left = b->remaining;
      UnlockBag(i);
      return Status::ResourceExhausted("BagSampler: " + BagName(i) + " has " + std::to_string(left) +
                                       " instances left in this cycle, fewer than k=" + std::to_string(k) +
                                       "; call reset(" + std::to_string(i) + ") or use on_exhausted=\"reset\"");
    }
    if (restart) StartCycle(i);
  }
  const uint32_t n = std::min(k, b->remaining);
  // Draw number t of this bag seeds the generator: reproducible given the
  // order of draws, with no counter shared by every drawer (a cache line
  // every process would write).
  const uint64_t t = b->draws++;
  SplitMix rng{h_->seed ^ (uint64_t{i} * 0x9E3779B97F4A7C15ull) ^ (t * 0xD1B54A32D192ED03ull)};
  uint8_t* av = available() + b->first;
  const double* w = weights() + b->first;
  int64_t* picks = journal(i);
  // Choose first (no shared writes), in the journal: k weighted picks
  // without replacement.  A pick is drawn from all available instances by
  // binary search over prefix sums, and drawn again if this draw already
  // took it: exactly the sequential without-replacement probabilities.
  thread_local std::vector<double> prefix;
  prefix.resize(b->size);
  double total = 0;
  for (uint32_t j = 0; j < b->size; ++j) {
    total += av[j] && w[j] > 0 ? w[j] : 0.0;
    prefix[j] = total;
  }
  uint32_t chosen = 0;
  for (uint32_t tries = 0; chosen < n && total > 0; ++tries) {
    const double r = rng.Uniform() * total;
    auto it = std::upper_bound(prefix.begin(), prefix.end(), r);
    int64_t pick = it == prefix.end() ? b->size - 1 : it - prefix.begin();
    while (pick > 0 && prefix[pick] == prefix[pick - 1]) --pick;  // rounding onto a zero weight
    bool taken = prefix[pick] == (pick ? prefix[pick - 1] : 0.0);
    for (uint32_t q = 0; q < chosen && !taken; ++q) taken = picks[q] == pick;
    if (taken) {
      if (tries < 64) continue;
      // Most of the weight is already taken: pick among the rest directly.
      double rest = 0;
      pick = -1;
      for (uint32_t j = 0; j < b->size; ++j) {
        const double wj = prefix[j] - (j ? prefix[j - 1] : 0.0);
        bool done = false;
        for (uint32_t q = 0; q < chosen; ++q) done |= picks[q] == j;
        if (!done && wj > 0) {
          rest += wj;
          if (rng.Uniform() * rest < wj) pick = j;  // reservoir choice, weight-proportional
        }
      }
      if (pick < 0) break;  // nothing left with a usable weight
    }
    picks[chosen++] = pick;
    tries = 0;
  }
  // Then apply, journaled: a death from here on is rolled back.
  b->journal_n = chosen;
  b->journal = static_cast<uint32_t>(BagJournal::kTaking);
  for (uint32_t q = 0; q < chosen; ++q) {
    av[picks[q]] = 0;
    if (q == 0 && testing::g_bag_sampler_mid_draw) testing::g_bag_sampler_mid_draw();
  }
  b->remaining -= chosen;
  out->assign(picks, picks + chosen);
  if (cycle) *cycle = b->cycle;
  b->journal = static_cast<uint32_t>(BagJournal::kIdle);
  UnlockBag(i);
  return Status::OK();
}

Status BagSampler::SetWeights(uint32_t i, const double* w, uint32_t n) {
  if (i < h_->num_bags && n != bag(i)->size)
    return Status::InvalidArgument("BagSampler: " + BagName(i) + " has " + std::to_string(bag(i)->size) +
                                   " instances, got " + std::to_string(n) + " weights");
  for (uint32_t j = 0; j < n; ++j)
    if (!(w[j] >= 0) || !std::isfinite(w[j]))
      return Status::InvalidArgument("BagSampler: weight " + std::to_string(j) + " of " + BagName(i) + " is " +
                                     std::to_string(w[j]) + "; weights must be finite and >= 0");
  STOKER_RETURN_IF_ERROR(LockBag(i));
  BagState* b = bag(i);
  std::memcpy(weights() + b->first, w, sizeof(double) * n);
  uint32_t remaining = 0;
  for (uint32_t j = 0; j < b->size; ++j) remaining += available()[b->first + j] && w[j] > 0;
  b->remaining = remaining;
  UnlockBag(i);
  return Status::OK();
}

Status BagSampler::Reset(uint32_t i) {
  STOKER_RETURN_IF_ERROR(LockBag(i));
  StartCycle(i);
  UnlockBag(i);
  return Status::OK();
}

Result<uint32_t> BagSampler::Remaining(uint32_t i) {
  STOKER_RETURN_IF_ERROR(LockBag(i));
  const uint32_t r = bag(i)->remaining;
  UnlockBag(i);
  return r;
}

}  // namespace stoker
