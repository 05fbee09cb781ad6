"""An epoch resumed on another topology: another world size or batch size
(docs/design/epoch_protocol.md, "Resuming on another world size").

An epoch's global order (every rank's samples, before the rank split) is a
function of a small recipe the loader records when the epoch begins
(_sampling.native_epoch): torch's randperm of a seed, or of a generator's
state, a keyed Feistel permutation, or the identity.  Ranks in lockstep that
stop mid-epoch have consumed a set of places of that order that their
common delivered batches determine (ConsumedPlaces, src/order/index_order.h);
a job that resumes on W' ranks reads what remains (RemainderOrder), split
between its ranks as DistributedSampler splits (padded by repeating the
remainder's start, or cut).  Each such resume is a segment of the epoch: the
state carries the recipe and the segments, a few numbers each, and the order
is rebuilt from them, the same on every rerun, with nothing replayed.
"""
from __future__ import annotations

from typing import Optional

from stoker import _mix_state
from stoker import _native as N

#: The samplers whose global order stoker knows, for messages.
KNOWN = ("torch's SequentialSampler and RandomSampler (without replacement, num_samples=len(dataset)), "
         "DistributedSampler, stoker's distributed=True and shuffle='scalable', a StreamingDataset's, a Mix's and a "
         "ParquetDataset's")


def global_order(recipe: dict, stream=None):
    """The epoch's global order (an EpochOrder) from its recipe; a
    StreamingDataset's (kind "stream") from its native dataset `stream`,
    whose epoch is begun; a ParquetDataset's (kind "row_groups") from its
    sampler `stream`."""
    kind, n = recipe["kind"], int(recipe["n"])
    if kind == "stream":
        order = stream.global_order(int(recipe["epoch"]), bool(recipe["shuffle"]), int(recipe["seed"]))
        if len(order) != n:
            raise ValueError(f"the state's epoch has {n} samples, and this StreamingDataset's epoch has {len(order)}: "
                             "resume with the same dataset")
        return order
    if kind == "row_groups":  # a ParquetDataset's (stoker.parquet.RowGroupSampler)
        if stream is None or not hasattr(stream, "global_order_of"):
            raise ValueError("the state's epoch is a ParquetDataset's: resume a loader over the same ParquetDataset")
        return stream.global_order_of(recipe)
    if kind == "iota":
        return N.lib.iota_order(n)
    if kind == "randperm":
        return N.lib.torch_randperm_seeded(n, int(recipe["seed"]), n)
    if kind == "randperm_state":
        return N.lib.torch_randperm(n, n, recipe["words"], int(recipe["left"]), int(recipe["next"]), 0)
    if kind == "mix":
        return _mix_state.order_of(recipe)
    if kind == "feistel":
        return N.lib.feistel_order(n, int(recipe["seed"]), int(recipe["epoch"]))
    raise ValueError(f"stoker: an epoch order of unknown kind {kind!r} in the loader state")


def rank_part(order, world: int, rank: int, pad: bool, split: str = "strided"):
    """Rank `rank`'s part of `order`, split as DistributedSampler splits
    ("strided") or in equal runs ("contiguous", a StreamingDataset's)."""
    per = N.lib.samples_per_rank(len(order), world, pad)
    make = N.lib.strided_rank_order if split == "strided" else N.lib.contiguous_rank_order
    return make(order, per * world, rank, world)


def read_positions(delivered: int, extra, batch_size: Optional[int], per_rank: int) -> list:
    """The positions of a rank's part its delivered batches covered: every
    batch below `delivered` and those in `extra`, as [begin, end) runs."""
    b = batch_size or 1
    runs = [(0, min(delivered * b, per_rank))] if delivered else []
    for k in sorted(int(e) for e in extra):
        lo, hi = k * b, min((k + 1) * b, per_rank)
        if lo >= hi:
            continue
        if runs and lo <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], hi))
        else:
            runs.append((lo, hi))
    return [list(r) for r in runs if r[0] < r[1]]


def _less(order, seg: dict):
    """`order` less the places segment `seg` consumed of it."""
    consumed = N.lib.consumed_places([tuple(r) for r in seg["read"]], int(seg["world"]),
                                     seg.get("split", "strided") == "strided", int(seg["total"]))
    return N.lib.remainder_order(order, consumed)


def fold(recipe: dict, segments: list, stream=None):
    """The global order less what every finished segment consumed, and the
    global order."""
    order = whole = global_order(recipe, stream)
    for seg in segments:
        order = _less(order, seg)
    return order, whole


def segment(length: int, world: int, pad: bool, delivered: int, extra, batch_size: Optional[int],
            split: str = "strided") -> dict:
    """The segment a job of `world` ranks made of an order `length` long (the
    folded global order it split) by delivering these batches."""
    per = N.lib.samples_per_rank(length, world, pad)
    return {"world": int(world), "total": int(per * world), "split": split,
            "read": read_positions(int(delivered), extra, batch_size, per)}


def resumed_order(saved: dict, delivered: int, extra, world: int, rank: int, pad: bool,
                  batch_size: Optional[int], n: Optional[int], stream=None):
    """This rank's order for the rest of the epoch a state describes (`saved`
    its "order", `delivered`/`extra` its batches), the segments the epoch
    has had so far, `same` when the topology is the saved one (the order is
    then the uninterrupted run's, and the delivered batches are skipped as
    before), the rest's length and the epoch's global order.  `n`: the
    dataset's length (None: not checked here)."""
    recipe = saved["recipe"]
    if n is not None and int(recipe["n"]) != n:
        raise ValueError(f"the state's epoch is of a dataset of {recipe['n']} samples, and this loader's dataset has "
                         f"{n}: resume with the same dataset")
    split = recipe.get("split", "strided")
    segments = list(saved["segments"])
    order, whole = fold(recipe, segments, stream)
    same = (int(saved["world"]), saved["batch_size"], bool(saved["pad"])) == (world, batch_size, pad)
    if not same and (delivered or extra):
        segments.append(segment(len(order), int(saved["world"]), bool(saved["pad"]), delivered, extra,
                                saved["batch_size"], split))
        order = _less(order, segments[-1])
    return rank_part(order, world, rank, pad, split), segments, same, len(order), whole


def padding(length: int, world: int, rank: int, pad: bool, split: str = "strided") -> int:
    """How many of rank `rank`'s samples are the padding of a split of an
    order `length` long (repeats of its start, so that every rank takes as
    many steps)."""
    per = N.lib.samples_per_rank(length, world, pad)
    if split == "strided":  # places rank + j * world
        first_pad = max(0, -(-(length - rank) // world))
        return max(0, per - first_pad)
    return max(0, (rank + 1) * per - max(length, rank * per))


class EpochPlan:
    """What an epoch's order is made of, as a loader's iterator began it:
    the recipe of its global order (None: a sampler stoker does not know),
    the segments it had (topology changes of a resumed epoch), this loader's
    split (world, rank, pad) and stats()'s counts of this rank's part."""

    def __init__(self, recipe: Optional[dict]):
        self.recipe = dict(recipe) if recipe else None
        self.segments = []
        self.split = (recipe.get("world", 1), recipe.get("rank", 0), recipe.get("pad", True)) if recipe else \
            (1, 0, True)
        self.counts = None
        self.length = None  # the rest of the epoch this topology splits (the folded global order's length)
        self.mix_order = None  # a Mix's global order, whose counters a state carries

    @classmethod
    def begin(cls, loader, resume: Optional[dict], iterable: bool, native_order_of):
        """Begins the epoch's order: native_order_of(recipe) is the loader's
        order of its sampler (or None: iterated in Python), filling `recipe`.
        For a resumed epoch whose state says what its order is made of, the
        rest of it on this topology: a new order, and nothing to skip, when
        the world size or batch size changed; else the saved order with its
        delivered batches skipped.  Returns (plan, order, resume)."""
        saved = resume.get("order") if resume is not None and not iterable else None
        load_topology = getattr(loader.sampler, "_stoker_load_topology", None)
        if saved is not None and load_topology is not None:  # a StreamingDataset's sampler plans its own fetches
            load_topology(saved, resume["delivered"], resume["delivered_extra"], loader.batch_size)
        recipe = {}
        native_order = None if iterable else native_order_of(recipe)
        plan = cls(recipe)
        mix = recipe.get("kind") == "mix"
        if saved is None:
            plan.mix_order = getattr(loader.sampler, "_stoker_global", None) if mix else None
            plan._count(recipe.get("n"))
            return plan, native_order, resume
        if not recipe:
            raise ValueError(f"stoker: the state describes its epoch's order, but this loader's sampler "
                             f"({type(loader.sampler).__name__}) is not one whose order stoker knows ({KNOWN}): it "
                             "cannot place the rest of the epoch")
        if (saved["recipe"]["kind"] == "stream") != hasattr(loader.sampler, "_stoker_resumed"):
            raise ValueError("stoker: the state's epoch and this loader are not both a StreamingDataset's: resume "
                             "a loader with the dataset it saved")
        plan.recipe = saved["recipe"]
        world, rank, pad = plan.split
        if mix and saved["recipe"]["kind"] == "mix" and _mix_state.same_mix(saved["recipe"], recipe):
            plan.recipe = _mix_state.expand(saved["recipe"], recipe)
            saved = dict(saved, recipe=plan.recipe)
        elif mix and saved["recipe"]["kind"] == "mix":
            # The Mix changed (weights, sources): the rest of the epoch is the
            # new mix's, from where the saved job stopped.
            plan.recipe = _mix_state.changed(saved["recipe"], recipe, loader.sampler.mix)
            plan.mix_order = global_order(plan.recipe)
            plan._count(len(plan.mix_order))
            return plan, rank_part(plan.mix_order, world, rank, pad), dict(resume, delivered=0, delivered_extra=[])
        if saved["recipe"]["kind"] == "stream":
            plan.segments, same, length = loader.sampler._stoker_resumed
            part = native_order  # (the sampler made the rest of the epoch itself)
        else:
            part, plan.segments, same, length, whole = resumed_order(
                saved, resume["delivered"], resume["delivered_extra"], world, rank, pad, loader.batch_size,
                None if mix else recipe.get("n"),  # (a Mix's recipes compare above)
                loader.sampler if saved["recipe"]["kind"] == "row_groups" else None)
            plan.mix_order = whole if mix else None
        plan._count(length if length is not None else recipe.get("n"))
        if same and not plan.segments:
            # The uninterrupted run's order, as the sampler made it (a Mix's
            # from the state's counters: the skip replays nothing).
            return plan, part if mix else native_order, resume
        if not same:
            resume = dict(resume, delivered=0, delivered_extra=[])  # what was delivered is not in `part`
        return plan, part, resume

    def _count(self, length: Optional[int]) -> None:
        """stats()["epoch_order"]: this rank's samples of the epoch (of its
        rest, resumed on another topology) and how many of them are the
        split's padding (repeats, so that every rank takes as many steps)."""
        self.length = length
        if length is None or self.recipe is None:
            return
        world, rank, pad = self.split
        split = self.recipe.get("split", "strided")
        self.counts = {"samples": int(N.lib.samples_per_rank(int(length), world, pad)),
                       "padding": padding(int(length), world, rank, pad, split),
                       "segments": len(self.segments), "kind": self.recipe["kind"]}

    def state(self, batch_size: Optional[int], delivered: int, extra) -> dict:
        """The state's "order": the recipe, the segments so far and this
        loader's split, for resumed_order; a Mix's recipe with the counters
        where the delivered batches end (_mix_state.cursor)."""
        world, _, pad = self.split
        recipe = self.recipe
        if recipe.get("kind") == "mix" and self.mix_order is not None and self.length is not None:
            now = segment(self.length, world, pad, delivered, extra, batch_size, recipe.get("split", "strided"))
            recipe = _mix_state.compact(_mix_state.cursor(recipe, self.mix_order, self.segments + [now]))
        return {"recipe": recipe, "segments": list(self.segments), "world": world, "pad": pad,
                "batch_size": batch_size}

