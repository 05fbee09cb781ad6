"""Epoch orders made natively for the samplers whose order is known, so that
no Python list of every index is built and the first batch goes out as soon
as its indices are drawn:

- torch's RandomSampler (shuffle=True; with or without a generator, without
  replacement) and DistributedSampler (and stoker's ShardedSampler): exactly
  the indices torch draws, from torch's own generator state
  (order/torch_randperm.h reproduces torch.randperm bit for bit);
- stoker.sampling.ScalableShuffleSampler (a keyed permutation with no storage,
  order/feistel_order.h) and a StreamingDataset's StreamingSampler: any
  sampler with a `_stoker_native_order()` method makes its own.

native_epoch(sampler) begins the sampler's epoch as iterating it would (the
same draws from torch's global generator) and returns an EpochOrder, or None
for any other sampler (it is then iterated in Python, unchanged).
"""
from __future__ import annotations

from typing import Iterator, Optional

import numpy as np

from stoker import _native as N

# torch.Generator.get_state() of a CPU generator: CPUGeneratorImplState, whose
# legacy part holds the Mersenne Twister: int64 seed, int32 left, int32
# seeded, uint64 next, uint64 state[624], ...; then the normal caches.
_STATE_BYTES = 5056
_LEFT_AT, _NEXT_AT, _WORDS_AT, _WORDS = 8, 16, 24, 624

class Pending(dict):
    """A loader's generators that its native randperms have not written
    their draws back into yet: id -> (generator, order); settled at the end
    of the epoch or before the loader uses them again.  A copy or a pickle of
    the loader carries none (an order is this process's)."""

    def __reduce__(self):
        return Pending, ()

    def __deepcopy__(self, memo):
        return Pending()

    def __copy__(self):
        return Pending()


class EpochPasses:
    """The epochs of stoker's own samplers: each pass begins the next epoch
    unless set_epoch() said which (as DistributedSampler's set_epoch, without
    having to call it)."""

    epoch = 0
    _explicit = False
    _begun = 0  # the epoch the last pass began

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        self._explicit = True

    def _begin_epoch(self) -> int:
        """The epoch this pass is; the next pass is the one after unless
        set_epoch() says otherwise."""
        epoch = self.epoch
        if not self._explicit:
            self.epoch += 1
        self._explicit = False
        self._begun = epoch
        return epoch


def _mt_of(generator):
    """(624 words as bytes, left, next) of a CPU torch.Generator, or None."""
    if generator.device.type != "cpu":
        return None
    st = generator.get_state().numpy()
    if st.size != _STATE_BYTES:
        return None  # another layout: leave it to torch
    left = int(st[_LEFT_AT:_LEFT_AT + 4].view(np.int32)[0])
    nxt = int(st[_NEXT_AT:_NEXT_AT + 8].view(np.uint64)[0])
    words = st[_WORDS_AT:_WORDS_AT + 8 * _WORDS].view(np.uint64).astype(np.uint32).tobytes()
    return words, left, nxt


def _set_mt(generator, words: bytes, left: int, nxt: int) -> None:
    st = generator.get_state().clone()
    a = st.numpy()
    a[_LEFT_AT:_LEFT_AT + 4] = np.array([left], np.int32).view(np.uint8)
    a[_NEXT_AT:_NEXT_AT + 8] = np.array([nxt], np.uint64).view(np.uint8)
    a[_WORDS_AT:_WORDS_AT + 8 * _WORDS] = np.frombuffer(words, np.uint32).astype(np.uint64).view(np.uint8)
    generator.set_state(st)


def settle(pending: dict, generator, complete: bool = True) -> None:
    """Writes into `generator` what torch's RandomSampler would have drawn
    from it by the end of the epoch (complete: its permutation and the empty
    one after it) or before it (an epoch left early: the permutation only),
    waiting for the draw to end."""
    entry = pending.pop(id(generator), None)
    if entry is not None:
        g, order = entry
        _set_mt(g, *order.final_generator_state(complete))


def settle_all(pending: dict, complete: bool = True) -> None:
    for key in list(pending):
        settle(pending, pending[key][0], complete)


def _seed64(seed: int) -> int:
    return int(seed) & 0xFFFF_FFFF_FFFF_FFFF  # manual_seed's wrap of a negative seed


def native_epoch(sampler, pending: Optional[dict] = None, recipe: Optional[dict] = None) -> Optional[object]:
    """This epoch's order of `sampler` as an EpochOrder, begun now; None
    where the sampler is not one whose order stoker makes.  A RandomSampler
    with a generator of its own needs `pending` (the caller settles it).
    `recipe`, when given, receives what the epoch's global order is made
    from (stoker._topology: an epoch resumed on another topology), for the
    samplers whose global order stoker knows; it is left empty for others."""
    import torch
    from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler

    if recipe is None:
        recipe = {}
    own = getattr(sampler, "_stoker_native_order", None)
    if own is not None:
        order = own()
        recipe.update(getattr(sampler, "_stoker_recipe", lambda: {})() or {})
        return order
    if type(sampler) is SequentialSampler:
        recipe.update(kind="iota", n=len(sampler.data_source), world=1, pad=True)
        return None
    if type(sampler) is RandomSampler:
        if sampler.replacement:
            return None
        n, k = len(sampler.data_source), sampler.num_samples
        if n == 0 or k > n or n >= 1 << 32:
            return None  # several permutations, or none: torch's own path
        g = sampler.generator
        if g is None:
            # As RandomSampler does: a seed from torch's global generator.
            seed = _seed64(int(torch.empty((), dtype=torch.int64).random_().item()))
            if k == n:
                recipe.update(kind="randperm", n=n, seed=seed, world=1, pad=True)
            return N.lib.torch_randperm_seeded(n, seed, k)
        if pending is None:
            return None
        settle(pending, g, complete=False)  # (an epoch left early; one that ended was settled then)
        state = _mt_of(g)
        if state is None:
            return None
        if k == n:
            recipe.update(kind="randperm_state", n=n, words=state[0], left=state[1], next=state[2], world=1,
                          pad=True)
        # With k == n, RandomSampler draws one more, empty, permutation at the
        # end of the epoch: the generator ends where torch leaves it.
        order = N.lib.torch_randperm(n, k, *state, 1 if k == n else 0)
        pending[id(g)] = (g, order)
        return order
    if isinstance(sampler, DistributedSampler) and (type(sampler) is DistributedSampler or
                                                    getattr(sampler, "_stoker_sharded", False)):
        n = len(sampler.dataset)
        where = dict(world=sampler.num_replicas, pad=not sampler.drop_last)
        if not sampler.shuffle:
            recipe.update(kind="iota", n=n, **where)
            return None
        if n == 0 or n >= 1 << 32:
            return None
        seed = _seed64(sampler.seed + sampler.epoch)
        recipe.update(kind="randperm", n=n, seed=seed, **where)
        base = N.lib.torch_randperm_seeded(n, seed, n)
        return N.lib.strided_rank_order(base, sampler.total_size, sampler.rank, sampler.num_replicas)
    return None


def iterate(order, chunk: int = 1 << 16) -> Iterator[int]:
    """The indices of an EpochOrder as Python ints, a chunk at a time."""
    n = len(order)
    for pos in range(0, n, chunk):
        yield from np.frombuffer(order.read(pos, chunk), dtype=np.int64).tolist()


def batches(order, batch_size: Optional[int], drop_last: bool, pending: dict) -> Iterator:
    """What torch's BatchSampler over the order yields: lists of batch_size
    indices (the last shorter unless drop_last), or single indices
    (batch_size None); at the end, `pending` settled."""
    if batch_size is None:
        yield from iterate(order)
        settle_all(pending)
        return
    n = len(order)
    for b in range(N.lib.batches_per_epoch(n, batch_size, drop_last)):
        pos = b * batch_size
        yield np.frombuffer(order.read(pos, min(batch_size, n - pos)), dtype=np.int64).tolist()
    settle_all(pending)  # the epoch is over: a generator it drew from as torch leaves it


def loader_epoch(loader, auto_collation, pending: dict, recipe: dict):
    """The epoch's order, begun now, where the sampler's order is made
    natively (a StreamingDataset's, torch's RandomSampler and
    DistributedSampler, stoker's ScalableShuffleSampler: native_epoch) and
    torch's own batching of it is all there is; else None (the sampler is
    iterated in Python)."""
    from torch.utils.data import BatchSampler
    sampler = loader.sampler
    if auto_collation:
        bs = loader.batch_sampler
        if type(bs) is not BatchSampler or bs.sampler is not sampler:
            return None
    order = native_epoch(sampler, pending, recipe)
    if recipe and "rank" not in recipe:
        recipe["rank"] = int(getattr(sampler, "rank", 0))
    return order


def eager(it):
    """Takes the first item of `it` now (so a lazy sampler draws its random
    order now) and returns an iterator that yields it first."""
    import itertools
    try:
        first = next(it)
    except StopIteration:
        return iter(())
    return itertools.chain((first,), it)
