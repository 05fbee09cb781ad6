"""Where a loader is, as a small dict (DataLoader.state_dict()), and the
random state an epoch's order is drawn from: what a new loader needs to
yield exactly the batches the first one would have yielded next
(docs/resume.md)."""
from __future__ import annotations

import torch

#: The version of DataLoader.state_dict()'s dict; load_state_dict refuses another.
STATE_VERSION = 1


def rng_snapshot(loader) -> dict:
    """The random state an epoch's order comes from: the loader's generator
    (or torch's global one), a sampler's own generator, and the epoch/seed of
    samplers that derive their order from them (DistributedSampler)."""
    snap = {"generator": (loader.generator if loader.generator is not None else torch.default_generator).get_state()}
    samplers = [loader.sampler, getattr(loader.batch_sampler, "sampler", None)]
    for i, sm in enumerate(samplers):
        g = getattr(sm, "generator", None)
        if isinstance(g, torch.Generator) and g is not loader.generator:
            snap[f"sampler{i}_generator"] = g.get_state()
        for attr in ("seed", "epoch"):
            v = getattr(sm, attr, None)
            if isinstance(v, int) and not isinstance(v, bool):
                snap[f"sampler{i}_{attr}"] = v
    return snap


def rng_restore(loader, snap: dict):
    (loader.generator if loader.generator is not None else torch.default_generator).set_state(snap["generator"])
    if snap.get("stream") is not None and hasattr(loader.sampler, "_stoker_load_state"):
        loader.sampler._stoker_load_state(snap["stream"])  # the epoch's shards, to read the same ones
    samplers = [loader.sampler, getattr(loader.batch_sampler, "sampler", None)]
    for i, sm in enumerate(samplers):
        g = getattr(sm, "generator", None)
        if f"sampler{i}_generator" in snap and isinstance(g, torch.Generator):
            g.set_state(snap[f"sampler{i}_generator"])
        for attr in ("seed", "epoch"):
            if f"sampler{i}_{attr}" in snap and sm is not None:
                setattr(sm, attr, snap[f"sampler{i}_{attr}"])


def iterator_state(it) -> dict:
    """The state of `it` (a _StokerIter) mid-epoch."""
    rng = it._epoch_rng
    # (From the iterator's own references: a loop that let go of it mid-epoch
    # takes its state while the cyclic GC may have cleared its loader's.)
    if hasattr(it._sampler_obj, "_stoker_state"):
        rng = dict(rng, stream=it._sampler_obj._stoker_state())  # a streaming dataset's epoch
    loader = it._loader_ref()
    state = {"version": STATE_VERSION, "epoch": getattr(loader, "_epoch", None) if loader is not None else
             it._loader_epoch,
             "rng": rng, "base_seed": int(it._base_seed), "num_workers": it._num_workers,
             "native_resets": int(getattr(it, "_native_resets", 0)),
             "iterable": it._is_iterable, "rank": it._rank, "world_size": it._world_size,
             "delivered_extra": [], "batch_size": it._batch_size}
    if it._is_iterable:
        # Per worker: batches delivered (the resumed run's skip included);
        # round robin goes on after the last one's worker.
        if it._num_workers:
            counts, last = it._pump.delivered_by_worker()
        else:
            counts, last = [it._delivered_local], 0
        base = it._iter_base or [0] * len(counts)
        counts = [int(c) + int(b) for c, b in zip(counts, base)]
        state.update(delivered=sum(counts), per_worker=counts,
                     next_worker=(last + 1) % max(1, it._num_workers) if last >= 0 else
                     int(getattr(it, "_resume_next", 0)))
    elif it._num_workers:
        delivered, extra = it._pump.delivered()
        state.update(delivered=int(delivered), delivered_extra=[int(b) for b in extra])
        if it._rng_board is not None and it._in_order:
            # Each worker's random state before its next batch (after the
            # last batch below `delivered` it loads, under the schedule of
            # worker counts): a resumed run's workers draw on from there
            # (same num_workers).
            from stoker.distributed import rank_and_world_size
            gen, nw = it._pump.generation, it._num_workers
            last = [it._pump.prev_batch_of(w, int(delivered)) for w in range(nw)]
            state["worker_rng_rank"] = rank_and_world_size()[0]
            state["worker_rng"] = [it._rng_board.lookup(w, gen, b if b >= 0 else None) for w, b in enumerate(last)]
        if it._tuner is not None:
            # The autotuner's: worker counts from the segment holding the next
            # batch on (batch k's worker is a function of k and of them), and
            # prefetch: a resumed run goes on with them.
            if it._tune_workers:
                sched = [list(s) for s in it._pump.schedule()]
                state["schedule"] = [s for i, s in enumerate(sched) if i + 1 == len(sched) or
                                     sched[i + 1][0] > int(delivered)]
            state["autotune"] = {"prefetch_factor": it._tuner.depth}
    else:
        # Skips not reached yet are ids delivered out of order before a resume.
        state.update(delivered=it._delivered_local, delivered_extra=sorted(it._local_skip))
    plan = getattr(it, "_plan", None)
    if plan is not None and plan.recipe is not None and not it._is_iterable:
        # What the epoch's global order is made of, its segments so far and
        # this loader's split: any topology can take the rest (stoker._topology).
        state["order"] = plan.state(it._batch_size, state["delivered"], state["delivered_extra"])
    return state
