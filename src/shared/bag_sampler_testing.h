// Test hook for BagSampler: called in the middle of a draw (journal written,
// picks half applied) when set, so a test can kill the drawer right there.
#ifndef STOKER_SHARED_BAG_SAMPLER_TESTING_H_
#define STOKER_SHARED_BAG_SAMPLER_TESTING_H_

namespace stoker::testing {
extern void (*g_bag_sampler_mid_draw)();
}  // namespace stoker::testing

#endif  // STOKER_SHARED_BAG_SAMPLER_TESTING_H_
