// stoker::BagSampler: draws instances of bags without replacement across
// every process that shares it (multiple-instance learning: each sample is
// a bag, and a draw takes k of its instances).
//
// Each bag has a weight per instance.  Draw(bag) picks k of the bag's
// instances still available in the current cycle, each pick with
// probability proportional to its weight among those left (torch.multinomial
// without replacement), and removes them for every process, atomically.
// When fewer than k are left, on_exhausted decides: kReset starts a new
// cycle (all available again) and draws from it, as MIL training code does;
// kFewer returns what is left (a new cycle starts once none is); kError
// returns ResourceExhausted and leaves the bag as it is.
//
// Weights can be changed at any time from any process (SetWeights); the next
// draw of that bag anywhere sees them.  A weight of 0 never draws.
//
// Robustness: each bag has its own robust lock, and a draw records its picks
// in the bag's journal before applying them.  If a process dies mid-draw,
// the next draw of that bag rolls the half-done draw back (its instances are
// available again: the dead process returned them to no one) and counts a
// recovery.  The bag is always consistent.
//
// Randomness: the t-th draw of bag b uses a generator seeded with
// (seed, b, t), so a run is reproducible given the order of each bag's draws.
#ifndef STOKER_BAG_SAMPLER_H_
#define STOKER_BAG_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "stoker/status.h"

namespace stoker {

class SharedBlock;
struct BagSamplerHeader;
struct BagState;

enum class OnExhausted : uint32_t { kReset = 0, kFewer = 1, kError = 2 };

class BagSampler {
 public:
  // bag_sizes[i] instances in bag i; weights (concatenated over bags, or
  // empty for all 1.0) must be finite and >= 0.
  static Result<std::shared_ptr<BagSampler>> Create(const std::vector<uint32_t>& bag_sizes, uint32_t k,
                                                    const std::vector<double>& weights, OnExhausted on_exhausted,
                                                    uint64_t seed);
  static Result<std::shared_ptr<BagSampler>> Open(std::shared_ptr<SharedBlock> block);

  // Writes the picked instance indices (within the bag, 0-based) to out
  // (resized), and the bag's cycle number to *cycle (may be null).
  Status Draw(uint32_t bag, std::vector<int64_t>* out, uint64_t* cycle);
  // Replaces bag `bag`'s weights (size must match).
  Status SetWeights(uint32_t bag, const double* weights, uint32_t n);
  // Makes every instance of the bag available again (a new cycle).
  Status Reset(uint32_t bag);
  // Instances of the bag still available in its current cycle.
  Result<uint32_t> Remaining(uint32_t bag);

  uint32_t num_bags() const;
  uint32_t k() const;
  uint32_t bag_size(uint32_t bag) const;
  uint64_t draws() const;       // all processes together
  uint64_t recoveries() const;  // half-done draws of dead processes rolled back
  const std::shared_ptr<SharedBlock>& block() const { return block_; }

 private:
  explicit BagSampler(std::shared_ptr<SharedBlock> b);
  BagState* bag(uint32_t i) const;
  double* weights() const;
  uint8_t* available() const;
  int64_t* journal(uint32_t i) const;
  // Locks bag i (robustly: rolls back a dead drawer's half-done draw).
  Status LockBag(uint32_t i);
  void UnlockBag(uint32_t i);
  // REQUIRES: bag i locked.  Makes every instance available (recounting).
  void NewCycle(uint32_t i);
  // REQUIRES: bag i locked.  Journaled: cycle + 1, then NewCycle.
  void StartCycle(uint32_t i);

  std::shared_ptr<SharedBlock> block_;
  BagSamplerHeader* h_;
};

}  // namespace stoker

#endif  // STOKER_BAG_SAMPLER_H_
