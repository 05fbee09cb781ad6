"""The autotuner: DataLoader(num_workers="auto", prefetch_factor="auto")
(docs/autotune.md).

It runs in the training loop's thread, from next(): a clock read per batch,
and a decision at most once per window (WINDOW_S and MIN_BATCHES batches).
What it reads each window (and at least max(MIN_BATCHES, 2 x workers)
batches, or MAX_WINDOW_S) is what the loader already counts:

- rate: batches delivered per second;
- stall: the share of the window the training loop waited in next();
- memory_wait: the share the scheduler waited for room in the slot pool;
- busy: the active workers' mean busy fraction (their stage clocks);
- store_wait: of that, the share they waited for a download (a
  StreamingDataset's shard not fetched yet);
- runnable: threads of the process tree running or waiting for a core, on
  average (/proc/<pid>/task/<tid>/schedstat);
- cost: worker seconds per batch, the workload's signature (busy seconds
  count the wait for a core too: where more threads are runnable than
  there are cores, they are scaled by cores / runnable).

What it does, one change at a time:

- memory first: the slot pool's resident bytes and the workers' own memory
  (private pages outside the pool), as measured, and what a change adds
  (batches in flight, a worker's own memory and the samples it builds)
  stay within MEMORY_SHARE (_autotune_gauge.py) of max_memory; when they no longer fit,
  prefetch comes down, then workers; idle slots' regions past the batches
  in flight and held give their pages back at each reading
  (Engine.trim_idle), so a lower setting reads as what it holds;
- once the batch size is known, small batches start as deep as an eighth
  of max_memory holds per worker (stoker's own rule for prefetch), and as
  the loop goes through in QUEUE_S;
- the loop waits (stall > STALL) and the workers are busy: one more worker
  (twice as many while each addition has paid nearly in proportion), if
  their threads keep `runnable` within cores + 2 and their memory fits,
  at a lower prefetch if that is what fits; workers not busy: twice the
  prefetch per worker, if it fits and the loop goes through it in QUEUE_S;
- the loop waits and the readers wait for downloads most of their time (a
  StreamingDataset read by C++ threads whose fetchers were left to choose):
  one fetcher (a download thread, a connection) more, twice as many while
  each addition has paid nearly in proportion, before any worker; the
  dataset's own fetcher scaling stops deciding once the tuner takes the
  count over (StreamingDataset::SetFetchers);
- the loop does not wait (stall < IDLE) and one worker fewer would carry
  the work: one worker fewer;
- after a change, SETTLE_S and the batches that were in flight are left
  out (a worker starting, batches made the old way); the window after them
  (for a fetcher, FETCH_WINDOW_S at least: shards come in bursts) is
  compared with the window before the change: an addition that does not
  gain GAIN (GAIN_WORKER for worker processes: a process costs memory and a
  share of the cores; GAIN_THREAD for a native dataset's reader threads,
  which cost neither) is undone and not tried again, a removal that loses
  more than GAIN is undone; until the workload changes (worker seconds per
  batch by CHANGE either way, from one window to the next or since the
  trial that closed a knob at the same worker count): then every knob is
  open again, and a change on trial is undone unjudged.

Worker processes (or a native dataset's C++ reader threads) start when the
count rises (a worker that ran before goes on with its random streams from
the board: _rng_state.py) and leave when it falls, once they hold no task
(Pump.retire: a clean exit, not a crash).
Which worker loads batch k is the scheduler's schedule of worker counts
(loader/scheduler.h), saved with a resume.
"""
from __future__ import annotations

import collections
import json
import logging
import time
import weakref
from typing import Optional

from stoker import _native as N
from stoker._autotune_gauge import Gauge, Reading, cores

AUTO = "auto"
WINDOW_S = 0.5
SETTLE_S = 0.25
MAX_WINDOW_S = 4.0
MIN_BATCHES = 4
STALL = 0.10
IDLE = 0.03
GAIN = 1.05
GAIN_WORKER = 1.10
GAIN_THREAD = 1.02
CHANGE = 1.6
QUEUE_S = 0.5
MAX_DEPTH = 32
STORE_BOUND = 0.5  # the readers wait for downloads this share of their busy time: the store is the bound
FETCH_WINDOW_S = 1.0
RETIRE_GRACE_S = 5.0

logger = logging.getLogger("stoker")


def max_workers() -> int:
    """The most workers num_workers="auto" starts: 8, or one per core where
    there are more (the grid torch users try goes to 8)."""
    return max(8, cores())


def check(name: str, value, allow_zero: bool):
    """value is "auto" or an int the option takes (else ValueError)."""
    if value == AUTO or value is None and name == "prefetch_factor":
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        least = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} should be a {least} int or 'auto', but got {value!r}")


def deep_prefetch(max_memory: int, workers: int, batch_bytes: int) -> int:
    """Batches in flight per worker for small batches: as many as an eighth
    of max_memory holds, between torch's 2 and MAX_DEPTH (stoker's own rule
    when prefetch_factor is left unset, and the autotuner's start)."""
    return max(2, min(MAX_DEPTH, max_memory // (8 * max(1, workers) * batch_bytes)))


def saved_schedule(it, resume: Optional[dict], batch_size) -> list:
    """The worker counts a resumed epoch goes on with: [(first batch, count)]
    from a state an autotuned loader saved on this topology, whose counts
    iterator `it` can start ([] otherwise: none to follow)."""
    sched = (resume or {}).get("schedule") if it._tune_workers else None
    if not sched or (resume["world_size"], resume.get("batch_size")) != (it._world_size, batch_size) or \
            max(c for _f, c in sched) > it._num_workers:
        return []
    return [(int(f), int(c)) for f, c in sched]


def starting_point(it, loader, resume: Optional[dict], auto: tuple) -> tuple:
    """(workers, prefetch per worker) that iterator `it` starts with: a
    resumed epoch's saved ones, else where the loader's last iterator left
    them (a loader without persistent workers makes one per epoch), else one
    worker (start small) and torch's 2."""
    carried = loader.__dict__.get("_stoker_tuned", {})
    saved = saved_schedule(it, resume, loader.batch_size)
    n = (saved[-1][1] if saved else min(carried.get("n", 1), it._num_workers)) if it._tune_workers else \
        it._num_workers
    depth = ((resume or {}).get("autotune", {}).get("prefetch_factor") or carried.get("depth", 2)) \
        if "prefetch_factor" in auto else loader.prefetch_factor or 2
    return n, depth


class Tuner:
    """One iterator's autotuner (see the module doc)."""

    def __init__(self, it, loader, workers: bool, prefetch: bool, n: int, depth: int):
        self._it = weakref.proxy(it)  # (the iterator owns its tuner: no cycle to wait for the GC)
        self.workers, self.prefetch = workers, prefetch
        self.n, self.depth = n, depth
        self.cap = it._num_workers
        # What the loader's earlier iterators learnt and decided carries on
        # (a loader without persistent workers makes one per epoch).
        self._carried = loader.__dict__.setdefault("_stoker_tuned", {})
        c = self._carried
        self.top_n, self.top_depth = min(c.get("top_n", self.cap), self.cap), c.get("top_depth", MAX_DEPTH)
        self.bottom_n, self.closed_cost = c.get("bottom_n", 1), c.get("closed_cost")  # (closed_cost: when a
        # trial closed a knob, the worker seconds per batch, with closed_n workers)
        self.closed_n = c.get("closed_n")
        # (knob, old, new, the rate before, worker seconds per batch before,
        # depth before): a change on trial, judged by the next window, that
        # of the next iterator where this one ended first (short epochs)
        self.trial = c.get("trial")
        self.skip = True   # the next window is left out (workers starting)
        self.decisions = c.setdefault("decisions", collections.deque(maxlen=1000))
        self.count = c.get("count", 0)
        self.noted = c.setdefault("noted", set())
        self.retiring = {}  # worker id -> (process, when asked to leave)
        self.linear = c.get("linear", False)  # the last worker trial paid in proportion
        self.linear_fetchers = c.get("linear_fetchers", False)  # the same for fetchers
        self._settle_at = 0  # the window after a change starts once the loop has this many batches
        self.gauge = Gauge(self._it)
        self._last_cost = None  # worker seconds per batch in the last window decided on
        self.t0 = time.monotonic()
        self.fetchers, self.top_fetchers, self._stream = None, 0, None
        self._take_fetchers(it)
        if self.trial is not None and self.trial[0] == "fetchers" and self.fetchers is None:
            self.trial = None  # (the dataset's fetchers are no longer this loader's to tune)
        self._base = self._read()

    def _take_fetchers(self, it):
        """A StreamingDataset read by C++ threads here whose fetchers were
        left to choose (fetchers=None): from now on their number is this
        tuner's knob (the dataset's own scaling stops deciding).  Worker
        processes read shards themselves, through the cache directory: no
        fetchers of this process to tune."""
        if it._native_ds is None:
            return
        from stoker.streaming import streaming_source
        stream = streaming_source(it._loader_ref().dataset)
        if stream is None or not stream._owner():
            return
        st = stream.stats()
        if not st["fetchers_auto"]:
            return
        self._stream, self.fetchers = stream, int(st["fetchers"])
        self.top_fetchers = min(self._carried.get("top_fetchers", st["fetchers_most"]), st["fetchers_most"])
        self._stream.set_fetchers(self.fetchers)

    @staticmethod
    def make(it, loader, auto: tuple, n: int, depth: int) -> Optional["Tuner"]:
        """The tuner of iterator `it` for the knobs in `auto` (None: none,
        or no workers).  Where the worker count cannot change mid-epoch (an
        IterableDataset's split) it is one per core (at most max_workers()),
        said as a decision."""
        if not auto or not it._num_workers:
            return None
        tuner = Tuner(it, loader, it._tune_workers, "prefetch_factor" in auto, n, depth)
        if "num_workers" in auto and not it._tune_workers:
            tuner._note("fixed", {}, "an IterableDataset's workers split its stream: a count fixed for the iterator, "
                                     "one per core", it._num_workers)
        return tuner

    def resume(self, schedule: list):
        """A resumed epoch's saved worker counts: the workers they name are
        started, and the last count is the tuner's (Pump.resume_at sets them)."""
        self._it._set_active_workers(max(c for _f, c in schedule))
        self.n = schedule[-1][1]
        self._it._pump.set_active_workers(self.n)
        self._it._pump.prefetch = self.depth * self.n

    # ---- what it sees (_autotune_gauge.py) ------------------------------

    def _read(self) -> Reading:
        return self.gauge.read()

    def _measure(self, a: Reading, b: Reading) -> dict:
        return self.gauge.measure(a, b, self.n, self.workers)

    def _memory(self, n: int, depth: int) -> tuple:
        return self.gauge.memory(n, depth, self.n, self.depth, self.workers)

    def _fits(self, n: int, depth: int) -> bool:
        need, budget = self._memory(n, depth)
        return need <= budget

    # ---- what it does ------------------------------------------------------

    def tick(self):
        """After each batch: a decision once a window is over."""
        now = time.monotonic()
        fetching = self.trial is not None and self.trial[0] == "fetchers"
        if now - self._base.t < (SETTLE_S if self.skip else FETCH_WINDOW_S if fetching else WINDOW_S):
            return
        batches = self._it._stats.total_batches  # (windows go on across epochs: their starts count too)
        if self.skip and batches < self._settle_at:
            return  # the batches in flight at the change, made the old way, are still coming
        self._retire_idle()
        if not self.skip and batches - self._base.batches < max(MIN_BATCHES, 2 * self.n) and \
                now - self._base.t < MAX_WINDOW_S:
            return
        cur = self._read()
        m = self._measure(self._base, cur)
        self._base = cur
        if self.skip:
            self.skip = False
            return
        self._decide(m)

    def _decide(self, m: dict):
        cost = m["cost_s"]
        last, self._last_cost = self._last_cost, cost
        if last and cost > 0 and max(cost / last, last / cost) > CHANGE:
            self._workload_changed(last, m, "from one window to the next")
            return
        if self.trial is not None and not self._judge(m):
            return  # (undone: the next window measures the setting before it again)
        if self.closed_cost and cost > 0 and self.closed_n != self.n:
            # (a worker's busy time counts its wait for a core too: with more
            # workers than cores a batch costs more worker seconds, the
            # workload the same; its signature is taken again at this count)
            self.closed_cost, self.closed_n = cost, self.n
            self._carried.update(closed_cost=cost, closed_n=self.n)
        elif self.closed_cost and cost > 0 and max(cost / self.closed_cost, self.closed_cost / cost) > CHANGE:
            self._workload_changed(self.closed_cost, m, "since a trial closed a knob")
        if self._shed(m) or self._seed_depth(m):
            return
        if m["stall"] > STALL:
            if m["memory_wait"] > m["stall"] / 2:
                self._note("memory", m, "the loop waits for room in max_memory: more workers or prefetch "
                                        "cannot help (raise max_memory, or make batches smaller)")
                return
            if self._more_fetchers(m):
                return
            target, depth = self._more_workers(m)
            top = min(self.top_depth, max(self.depth, self._depth_cap(m)))
            deeper = self.prefetch and self.depth < top and self._fits(self.n, min(top, 2 * self.depth))
            why = f"the loop waited {m['stall']:.0%} of the time, workers busy {m['busy']:.0%}"
            if target and (m["busy"] >= 0.75 or not deeper):
                self._try("num_workers", target, m, why, depth)
            elif deeper:
                self._try("prefetch_factor", min(top, 2 * self.depth), m, why)
            else:
                self._held(m, why)
        elif m["stall"] < IDLE and self.workers and self.n > self.bottom_n and m["busy"] * self.n < (self.n - 1) * 0.7:
            self._try("num_workers", self.n - 1, m,
                      f"the loop waited {m['stall']:.0%} of the time, {self.n} workers busy {m['busy']:.0%}: "
                      f"{self.n - 1} may carry the work")

    def _workload_changed(self, was: float, m: dict, when: str):
        """Worker seconds per batch moved by CHANGE: every knob is open
        again.  A change on trial is undone unjudged (its window and the one
        before it measured two workloads), and the next window starts once
        the batches in flight, made the old way, are through."""
        cost = m["cost_s"]
        self._record("workload", round(was, 6), round(cost, 6), m,
                     f"worker seconds per batch changed {cost / was:.2f}x {when}: every knob open again")
        self.top_n, self.top_depth, self.bottom_n, self.closed_cost = self.cap, MAX_DEPTH, 1, None
        if self.fetchers is not None:
            self.top_fetchers = self._stream.stats()["fetchers_most"]
        self.noted -= {"held", "memory"}  # (said again if they hold again)
        if self.trial is not None:
            knob, old, new, _rate, _cost, old_depth = self.trial
            self.trial = self._carried["trial"] = None
            self._set(knob, old, m, f"{new} was on trial when the workload changed: back to {old}, to measure again",
                      old_depth if knob == "num_workers" else None)
        self._settle_at = self._it._stats.total_batches + self._it._pump.prefetch
        self._last_cost = None  # (the next window is the new workload's first)
        self.skip = True

    def _depth_cap(self, m: dict) -> int:
        """The most batches in flight per worker the loop takes QUEUE_S to
        go through at the rate now (at least 2): a deeper queue of slow
        batches delays every change (in order, the batches queued on a
        worker go first) and gains nothing."""
        return max(2, int(m["batches_per_s"] * QUEUE_S / max(1, self.n)))

    def _seed_depth(self, m: dict) -> bool:
        """Once the batch size is known: small batches start as deep as
        stoker's own prefetch rule (deep_prefetch) and QUEUE_S allow, not
        from 2 a doubling at a time."""
        batch = self._it._engine.expected_batch_bytes
        if not self.prefetch or "seeded" in self.noted or batch <= 0:
            return False
        self.noted.add("seeded")
        depth = min(self.top_depth, self._depth_cap(m), deep_prefetch(self._it._max_memory, self.n, batch))
        if depth <= self.depth:
            return False
        self._set("prefetch_factor", depth, m, f"batches of {batch} bytes: as many in flight per worker as an eighth "
                                               "of max_memory holds")
        self.skip = True
        return True

    def _held(self, m: dict, why: str):
        """The loop waits and no knob may move: says why, once per cause."""
        if self.workers and self.n < self.top_n:
            need, budget = self._memory(self.n + 1, 1 if self.prefetch else self.depth)
            if need > budget:
                self._note("held", m, f"{why}; one more worker would need {need} bytes, more than the {budget} "
                                      f"of max_memory={self._it._max_memory} it may plan")
            elif not self._room_for(m, 1):
                self._note("held", m, f"{why}; one more worker would make more than cores + 2 = {cores() + 2} "
                                      f"threads runnable ({m['runnable']:.1f} now)")
        elif self.trial is None:
            self._note("held", m, f"{why}; every setting that fits was tried")

    def _room_for(self, m: dict, more: int) -> bool:
        """`more` workers keep the tree's runnable threads within cores + 2
        (a worker adds what one runs or waits for a core now)."""
        per_worker = min(1.0, m["runnable"] / (self.n + 1))
        return m["runnable"] + more * per_worker <= cores() + 2

    def _more_fetchers(self, m: dict) -> bool:
        """The loop waits and the readers wait for downloads most of their
        time: a trial of one fetcher more (twice as many while each addition
        paid nearly in proportion), if the tuner has the fetchers and one
        more thread keeps the tree's runnable threads within cores + 2 (True:
        a trial began)."""
        if self.fetchers is None or self.fetchers >= self.top_fetchers or m["store_wait"] < STORE_BOUND or \
                m["runnable"] + 0.5 > cores() + 2:
            return False
        target = min(self.top_fetchers, 2 * self.fetchers if self.linear_fetchers else self.fetchers + 1)
        self._try("fetchers", target, m, f"the loop waited {m['stall']:.0%} of the time, the readers waited for "
                                         f"downloads {m['store_wait']:.0%} of theirs")
        return True

    def _more_workers(self, m: dict) -> tuple:
        """The worker count to try next and its prefetch depth ((0, _):
        none): one more, or twice as many while each addition has paid
        nearly in proportion (a store's latency, a sleep), as many as fit the
        cores and max_memory, at a lower depth if that is what fits (when
        prefetch is tuned too)."""
        if not self.workers or self.n >= self.top_n:
            return 0, self.depth
        target = min(self.top_n, 2 * self.n) if self.linear else self.n + 1
        lowest = 1 if self.prefetch else self.depth
        for n in range(target, self.n, -1):
            if not self._room_for(m, n - self.n):
                continue
            for depth in range(self.depth, lowest - 1, -1):
                if self._fits(n, depth):
                    return n, depth
        return 0, self.depth

    def _shed(self, m: dict) -> bool:
        """max_memory first: lowers prefetch, then workers, while what they
        hold does not fit (True when it changed something)."""
        need, budget = self._memory(self.n, self.depth)
        if need <= budget:
            return False
        why = (f"{need} bytes (batches in flight and held, and the workers' own memory) > the {budget} of "
               f"max_memory={self._it._max_memory} it may plan")
        if self.prefetch and self.depth > 1:
            self.top_depth = self.depth - 1
            self._set("prefetch_factor", self.depth - 1, m, why)
        elif self.workers and self.n > 1:
            self.top_n = self.n - 1
            self._set("num_workers", self.n - 1, m, why)
        else:
            self._note("shed", m, why + ": nothing left to lower")
            return False
        self.skip = True
        return True

    def _value(self, knob: str) -> int:
        return self.n if knob == "num_workers" else self.fetchers if knob == "fetchers" else self.depth

    def _try(self, knob: str, new: int, m: dict, why: str, depth: Optional[int] = None):
        old, old_depth = self._value(knob), self.depth
        lower = f" with prefetch_factor {depth} (for max_memory)" if depth is not None and depth != old_depth else ""
        self._set(knob, new, m, why + f": trying {new}{lower}", depth)
        self.trial = self._carried["trial"] = (knob, old, new, m["batches_per_s"], m["cost_s"], old_depth)
        self.skip = True

    def _judge(self, m: dict) -> bool:
        """Keeps or undoes the change on trial (True: kept)."""
        knob, old, new, before, cost, old_depth = self.trial
        self.trial = self._carried["trial"] = None
        gain = m["batches_per_s"] / before if before > 0 else float("inf")
        last = self.decisions[-1] if self.decisions else {}
        # (a worker process more costs memory and a share of the cores; a reader thread costs little
        # memory, and none of the cores while it waits for one: a gain past the noise keeps it)
        need = GAIN if knob != "num_workers" else GAIN_THREAD if self._it._native_ds is not None else GAIN_WORKER
        keep = gain >= need if new > old else gain >= 1 / GAIN
        # (workers or fetchers that paid nearly in proportion: the next step doubles them)
        linear = keep and new > old and gain >= 0.9 * new / old
        if knob == "num_workers":
            self.linear = self._carried["linear"] = linear
        elif knob == "fetchers":
            self.linear_fetchers = self._carried["linear_fetchers"] = linear
        if last.get("knob") == knob and last.get("new") == new:
            last["gain"], last["kept"] = round(gain, 3), keep
        if keep:
            return True
        if new > old:  # (a doubled count that fails leaves the counts between open)
            if knob == "num_workers":
                self.top_n = new - 1 if new > old + 1 else old
            elif knob == "fetchers":
                self.top_fetchers = new - 1 if new > old + 1 else old
            else:
                self.top_depth = old
        else:
            self.bottom_n = old
        if cost:  # (the workload as it was with `old`)
            self.closed_cost, self.closed_n = cost, old if knob == "num_workers" else self.n
        why = f"the loop no longer waits ({m['stall']:.0%})" if new > old and m["stall"] < IDLE else \
            f"{new} gave {gain:.2f}x the rate with {old}"
        self._set(knob, old, m, f"{why}: back to {old}", old_depth if knob == "num_workers" else None)
        self.skip = True
        return False

    def _set(self, knob: str, value: int, m: dict, why: str, depth: Optional[int] = None):
        """Sets `knob` to `value` (a worker count may come with a prefetch
        depth: `depth`) and records the decision."""
        old = self._value(knob)
        self._settle_at = self._it._stats.total_batches + self._it._pump.prefetch  # (what is in flight now)
        if knob == "fetchers":
            self._stream.set_fetchers(value)
            self.fetchers = value
            self._record(knob, old, value, m, why)
            return
        if knob == "num_workers":
            self.depth = depth or self.depth
            self._it._set_active_workers(value)
            self.n = value
        else:
            self.depth = value
        self._it._pump.prefetch = self.depth * self.n
        self._record(knob, old, value, m, why)

    def _note(self, key: str, m: dict, why: str, value=None):
        if key not in self.noted:
            self.noted.add(key)
            self._record("num_workers" if key == "fixed" else key, None, value, m, why)

    def _record(self, knob, old, new, m: dict, why: str):
        d = {"t": round(time.monotonic() - self.t0, 3), "knob": knob, "old": old, "new": new,
             "measured": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in m.items()}, "reason": why}
        self.decisions.append(d)
        self.count += 1
        self._carried.update(n=self.n, depth=self.depth, top_n=self.top_n, top_depth=self.top_depth,
                             bottom_n=self.bottom_n, closed_cost=self.closed_cost, closed_n=self.closed_n,
                             count=self.count)
        if self.fetchers is not None:
            self._carried["top_fetchers"] = self.top_fetchers
        logger.info("stoker autotune: %s %s -> %s (%s)", knob, old, new, why)
        if N.lib.trace_recording():
            N.lib.trace_instant("autotune", json.dumps(d))

    # ---- workers leaving ---------------------------------------------------

    def _retire_idle(self):
        it = self._it
        for w, (proc, since) in list(self.retiring.items()):
            if proc.exitcode is None and time.monotonic() - since < RETIRE_GRACE_S:
                continue
            self.finish_retiring(w)
        if not self.workers:
            return
        native = it._native_ds is not None
        for w in range(self.n, self.cap):
            running = it._native_workers.running(w) if native else it._workers[w] is not None
            if not running or w in self.retiring or not it._pump.idle(w):
                continue
            it._pump.retire(w)
            if native:  # a reader thread: idle, its ring closed, it leaves at once
                it._native_workers.join(w)
                it._pump.reclaim(w)
            else:
                self.retiring[w] = (it._workers[w], time.monotonic())

    def finish_retiring(self, w: int, wait_s: float = 0.0):
        """Worker w asked to leave: once gone (waiting up to wait_s, then
        killed), its id is free for a new process."""
        proc, _since = self.retiring.pop(w)
        proc.join(wait_s)
        if proc.exitcode is None:
            proc.kill()
        proc.join()  # (multiprocessing lets go of a process it has joined: its pipes close)
        self._it._pump.reclaim(w)
        self._it._workers[w] = None
        self._it._oom_watch[w] = None

    def stats(self) -> dict:
        return {"num_workers": self.n if self.workers else None, "prefetch_factor": self.depth,
                "fetchers": self.fetchers,
                "tuning": [k for k, on in (("num_workers", self.workers), ("prefetch_factor", self.prefetch),
                                           ("fetchers", self.fetchers is not None)) if on],
                "decisions_total": self.count, "decisions": list(self.decisions)}
