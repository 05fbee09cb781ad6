// Binds order/index_order.h, torch_randperm.h and feistel_order.h: an
// epoch's order as Python holds it (EpochOrder), and the orders made
// natively (torch's randperm, a Feistel permutation, a rank's part).
// Registration only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "core/mix.h"
#include "glue/errors.h"
#include "glue/py_pump.h"
#include "order/feistel_order.h"
#include "order/index_order.h"
#include "order/mix_order.h"
#include "order/torch_randperm.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {

TorchMT19937 GeneratorFrom(const py::bytes& words, int left, uint32_t next) {
  std::string_view w = words;
  if (w.size() != sizeof(TorchMT19937::state))
    Throw(Status::InvalidArgument("a torch generator state has 624 32-bit words, got " + std::to_string(w.size()) + " bytes"));
  if (left < 1 || left > TorchMT19937::kN || next > TorchMT19937::kN)
    Throw(Status::InvalidArgument("the torch generator state is not valid (left " + std::to_string(left) + ", next " +
                                  std::to_string(next) + ")"));
  TorchMT19937 g;
  std::memcpy(g.state, w.data(), w.size());
  g.left = left;
  g.next = next;
  return g;
}

}  // namespace

void BindOrder(py::module_& m) {
  py::class_<EpochOrderHandle>(m, "EpochOrder")
      .def("__len__", [](const EpochOrderHandle& o) { return o.order->size(); })
      // order[pos, pos + n) as int64 bytes, waiting (GIL released) until they are drawn.
      .def("read", [](const EpochOrderHandle& o, uint64_t pos, uint64_t n) {
             if (pos > o.order->size()) pos = o.order->size();
             n = std::min<uint64_t>(n, o.order->size() - pos);
             std::string out(n * sizeof(int64_t), '\0');
             Status st = [&] { py::gil_scoped_release nogil; return o.order->Read(pos, n, reinterpret_cast<int64_t*>(out.data())); }();
             Check(st);
             return py::bytes(out); })
      // torch's randperm only: (624 state words as bytes, left, next) after
      // every draw torch makes by the epoch's end (complete) or by its first
      // batch; waits (GIL released) for the draw.
      .def("final_generator_state", [](const EpochOrderHandle& o, bool complete) {
             if (!o.randperm) Throw(Status::InvalidArgument("this order is not torch's randperm"));
             TorchMT19937 g = [&] { py::gil_scoped_release nogil; return o.randperm->final_state(complete); }();
             return py::make_tuple(py::bytes(reinterpret_cast<const char*>(g.state), sizeof g.state), g.left, g.next); },
           py::arg("complete") = true)
      .def_property_readonly("drawn", [](const EpochOrderHandle& o) {
             return o.randperm ? o.randperm->drawn() : o.order->size(); });
  m.def("torch_randperm", [](uint64_t n, uint64_t count, const py::bytes& words, int left, uint32_t next, int extra_perms) {
          auto r = std::make_shared<TorchRandperm>(n, count, GeneratorFrom(words, left, next), extra_perms);
          return EpochOrderHandle{r, r};
        }, "The first `count` of torch.randperm(n) from a generator state, drawn on a thread as they are read.");
  m.def("torch_randperm_seeded", [](uint64_t n, uint64_t seed, uint64_t count) {
          auto r = std::make_shared<TorchRandperm>(n, count, TorchMT19937::Seeded(seed), 0);
          return EpochOrderHandle{r, r};
        }, "The first `count` of torch.randperm(n) from a generator seeded with `seed` (manual_seed).");
  m.def("feistel_order", [](uint64_t n, uint64_t seed, uint64_t epoch) {
          return EpochOrderHandle{std::make_shared<FeistelOrder>(n, FeistelOrder::SeedFor(seed, epoch)), nullptr};
        }, "A keyed permutation of [0, n) from (seed, epoch), with no storage.");
  m.def("mix_order", [](std::vector<uint64_t> sizes, std::vector<double> weights, uint64_t seed, uint64_t epoch,
                        bool shuffle, uint64_t samples, bool stop, std::vector<uint64_t> keys, std::vector<uint64_t> base,
                        uint64_t start, uint64_t at, std::vector<uint64_t> at_counts,
                        std::vector<std::pair<uint32_t, std::vector<uint64_t>>> shards) {
          MixSpec spec{std::move(sizes), std::move(weights), seed, epoch, shuffle, samples, stop,
                       std::move(keys), std::move(base), start, at, std::move(at_counts), {}};
          for (auto& [window, s] : shards) spec.shards.push_back(MixSpec::Shards{window, std::move(s)});
          return EpochOrderHandle{Check(MixOrder::Make(std::move(spec))), nullptr};
        }, py::arg("sizes"), py::arg("weights"), py::arg("seed"), py::arg("epoch"), py::arg("shuffle"),
        py::arg("samples"), py::arg("stop"), py::arg("keys") = std::vector<uint64_t>{},
        py::arg("base") = std::vector<uint64_t>{}, py::arg("start") = 0, py::arg("at") = 0,
        py::arg("at_counts") = std::vector<uint64_t>{},
        py::arg("shards") = std::vector<std::pair<uint32_t, std::vector<uint64_t>>>{},
        "A mixed epoch's order of global indices (order/mix_order.h): sources by the largest deficit, each "
        "source's samples in its own order; `base`/`start` go on from a change of the mix, `at`/`at_counts` "
        "is a known cursor; `shards` ([(window, shard sizes)] per source, sizes [] for none) shuffles a source by "
        "windows of its shards.");
  m.def("mix_counters", [](const EpochOrderHandle& o, uint64_t pos) {
          auto mix = std::dynamic_pointer_cast<MixOrder>(o.order);
          if (!mix) Throw(Status::InvalidArgument("this order is not a Mix's"));
          py::gil_scoped_release nogil;
          return mix->Counters(pos);
        }, "The samples each source took before position `pos` of a Mix's order (since its change, if any).");
  m.def("sample_seed", &SampleSeed, py::arg("seed"), py::arg("epoch"), py::arg("index"),
        "The seed of sample `index` in `epoch` (sample_seeds=True: core/mix.h's SampleSeed).");
  m.def("iota_order", [](uint64_t n) { return EpochOrderHandle{std::make_shared<IotaOrder>(n), nullptr}; },
        "0, 1, ..., n-1, with no storage.");
  m.def("remainder_order", [](const EpochOrderHandle& base, const std::vector<std::pair<uint64_t, uint64_t>>& consumed) {
          std::vector<PlaceRange> ranges;
          for (const auto& [b, e] : consumed) ranges.push_back({b, e});
          return EpochOrderHandle{std::make_shared<RemainderOrder>(base.order, std::move(ranges)), nullptr};
        }, "`base` less the places in `consumed` ([(begin, end), ...]), in base's order.");
  m.def("consumed_places", [](const std::vector<std::pair<uint64_t, uint64_t>>& read, uint32_t world, bool strided,
                              uint64_t total) {
          std::vector<PlaceRange> in;
          for (const auto& [b, e] : read) in.push_back({b, e});
          std::vector<std::pair<uint64_t, uint64_t>> out;
          for (const PlaceRange& r : ConsumedPlaces(in, world, strided, total)) out.emplace_back(r.begin, r.end);
          return out;
        }, "The places of a global order (`total` long once split) that `world` ranks in lockstep consumed, each "
           "having read the positions `read` of its own part.");
  m.def("contiguous_rank_order", [](const EpochOrderHandle& base, uint64_t total, uint32_t rank, uint32_t world) {
          if (world < 1 || rank >= world)
            Throw(Status::InvalidArgument("rank " + std::to_string(rank) + " is not below world size " + std::to_string(world)));
          return EpochOrderHandle{std::make_shared<ContiguousRankOrder>(base.order, total, rank, world), nullptr};
        }, "Rank `rank`'s part of `base` as the contiguous split takes it (made `total` long, the rank-th of world runs).");
  m.def("strided_rank_order", [](const EpochOrderHandle& base, uint64_t total, uint32_t rank, uint32_t world) {
          if (world < 1 || rank >= world)
            Throw(Status::InvalidArgument("rank " + std::to_string(rank) + " is not below world size " + std::to_string(world)));
          return EpochOrderHandle{std::make_shared<StridedRankOrder>(base.order, total, rank, world), base.randperm};
        }, "Rank `rank`'s part of `base` as DistributedSampler takes it (made `total` long, every world-th place).");
}

}  // namespace stoker::glue
