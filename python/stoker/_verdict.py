"""stats()["bottleneck"]: which stage holds the training loop back, and what to
change.

The loop's wait (the time next() spends waiting for a batch) is split by
cause:
  * memory_budget: the scheduler held tasks back because the slot pool had no
    room (Scheduler::NoRoomWaitNs), plus the share of the workers' time spent
    waiting for room (a batch outgrowing its region);
  * the rest in proportion to the workers' time in each stage (core/stage.h,
    summed over workers): getitem (the dataset's __getitem__ or a native
    dataset's reads), store (a reader waiting for a download), decode,
    transform and collate (publishing included).
The fractions sum to 1.  When the loop waits less than a tenth of its time,
the loader keeps ahead and the verdict is the training loop itself."""
from __future__ import annotations

from stoker._autotune import cores

STAGES = ("getitem", "store", "decode", "transform", "collate", "memory_budget")
LOOP = "training_loop"
LOOP_BOUND_BELOW = 0.10  # the loop waits less than this fraction of its time: the loader keeps ahead

# core/stage.h's stages (stats()["workers"][i]["stage_s"]) -> the verdict's
_OF = {"read": "getitem", "wait_store": "store", "fetch": "store", "decode": "decode", "transform": "transform",
       "collate": "collate", "publish": "collate", "wait_memory": "memory_budget"}


def counters(st: dict, no_room_s: float, loop) -> dict:
    """The cumulative numbers a verdict is made of, from stats(), the pump's
    no_room_wait_s() (0 without workers) and the loop's (stall, elapsed,
    batches) since the epoch's first batch, and that batch's wait (workers
    starting: not a stage's)."""
    stages = dict.fromkeys(STAGES, 0.0)
    for w in st.get("workers", ()):
        for k, v in w.get("stage_s", {}).items():
            s = _OF.get(k)
            if s is not None:
                stages[s] += v
    return {"stall_s": loop[0], "elapsed_s": loop[1], "batches": loop[2], "first_batch_s": loop[3],
            "stages": stages, "no_room_s": no_room_s}


def judge(now: dict, base: dict, st: dict, native: bool) -> dict:
    """The verdict over what happened between two counters(): `base`, taken
    as the epoch began, and `now`."""
    wait = max(0.0, now["stall_s"] - base["stall_s"])
    elapsed = max(1e-9, now["elapsed_s"] - base["elapsed_s"])
    batches = now["batches"] - base["batches"]
    work = {s: max(0.0, now["stages"][s] - base["stages"][s]) for s in STAGES}
    no_room = min(wait, max(0.0, now["no_room_s"] - base["no_room_s"]))
    workers = len(st.get("workers", ()))
    out = {"stage": None, "loop_wait_fraction": min(1.0, wait / elapsed), "wait_by_stage": {},
           "worker_seconds": {s: round(v, 6) for s, v in work.items()}, "batches": batches,
           "window_s": round(elapsed, 3), "first_batch_s": round(now.get("first_batch_s", 0.0), 4), "advice": ""}
    if batches == 0:
        out["advice"] = "too few batches yet (the first, which waits for the workers to start, is left out)"
        return out
    if workers == 0:
        out["stage"] = "getitem"
        out["wait_by_stage"] = {"getitem": 1.0}
        out["advice"] = ("num_workers=0: the training loop's own process reads and collates every batch; "
                         f"use worker processes (num_workers up to {cores()})")
        return out
    total = sum(work.values())
    shares = {s: (work[s] / total if total > 0 else 0.0) for s in STAGES}
    by = {s: (wait - no_room) * shares[s] for s in STAGES}
    by["memory_budget"] += no_room
    norm = sum(by.values())
    if norm <= 0:  # (the loop never waited: where the workers' time went)
        fractions = shares if total > 0 else {}
    else:
        fractions = {s: v / norm for s, v in by.items()}
    out["wait_by_stage"] = {s: round(v, 4) for s, v in fractions.items() if v > 0}
    if out["loop_wait_fraction"] < LOOP_BOUND_BELOW:
        out["stage"] = LOOP
        out["advice"] = (f"the loader keeps ahead: the training loop waited {out['loop_wait_fraction']:.0%} of "
                         "its time for batches; the training step itself is the bound")
        return out
    stage = max(fractions, key=fractions.get) if fractions else "getitem"
    out["stage"] = stage
    out["advice"] = _advice(stage, work, batches, workers, st, native)
    return out


def _per_batch(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.0f} us"


def _advice(stage: str, work: dict, batches: int, workers: int, st: dict, native: bool) -> str:
    ncores = cores()
    per_batch = _per_batch(work[stage] / max(1, batches))
    who = "reader threads" if native else "workers"
    more = (f"raise num_workers (now {workers}; this machine has {ncores} cores), or num_workers='auto'"
            if workers < 2 * ncores
            else f"{workers} {who} on {ncores} cores already")
    if stage == "getitem":
        what = "a native dataset's reads" if native else "the dataset's __getitem__"
        return (f"{what} takes {per_batch} per batch in each of the {workers} {who}: {more}, "
                "or make it cheaper (a stoker.io native dataset reads without Python)")
    if stage == "store":
        return (f"the readers wait for downloads ({per_batch} per batch): more fetchers "
                "(StreamingDataset(fetchers=...)), a nearer store or a cache (mode='cached'), larger shards")
    if stage == "decode":
        return (f"decoding (images, Parquet row groups) takes {per_batch} per batch: {more}, or decode less "
                "(smaller images or a crop's box; Parquet: only the columns used, a lighter codec)")
    if stage == "transform":
        return f"transforms take {per_batch} per batch: {more}, or lighter transforms"
    if stage == "collate":
        return (f"collating takes {per_batch} per batch: a lighter collate_fn (stoker's default collates "
                "in C++ straight into shared memory), or fewer, larger tensors per sample")
    budget = st.get("max_memory", 0)
    batch = st.get("expected_batch_bytes", 0)
    fits = budget // batch if batch else 0
    want = batch * (2 * workers + 2) if batch else 0
    return (f"the slot pool's budget (max_memory={budget} bytes) holds about {fits} batches of {batch} bytes, "
            f"too few for {workers} {who} to work ahead: raise max_memory (to {want} bytes or more) or lower "
            "batch_size")
