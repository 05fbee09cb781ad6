"""The worker random-state primitives (stoker._rng_state): capture/restore
of the three global streams, the Recorder's change detection, and the
board's lookup rules."""
import random

import numpy as np
import torch

from stoker import _rng_state as R


def draws():
    return (random.random(), random.gauss(0, 1), float(np.random.normal()), float(np.random.rand()),
            float(torch.rand(()))), random.getrandbits(64)


def test_capture_restore_round_trip_with_cached_gaussians():
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    random.gauss(0, 1)   # leaves a cached gaussian in Python's random
    np.random.normal()   # ... and in numpy's legacy generator
    blob = R.capture()
    first = draws()
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    R.restore(blob)
    assert draws() == first


def test_the_recorder_reads_cpython_and_numpy_state_directly():
    rec = R.Recorder()
    assert rec._py_addr is not None and rec._np_addr is not None  # else the slow path is used (still exact)


def test_the_recorder_sees_every_stream_and_a_used_up_gaussian():
    rec = R.Recorder()
    rec.current()
    assert not rec.changed()
    for draw in (random.random, np.random.rand, lambda: torch.rand(1)):
        draw()
        assert rec.changed()
        assert not rec.changed()
    np.random.seed(5)
    np.random.normal()           # draws two, caches one
    assert rec.changed()
    np.random.normal()           # uses the cached one: no draw, still a change
    assert rec.changed()
    blob = rec.blob
    after = draws()
    R.restore(blob)
    assert draws() == after


def test_the_slow_path_sees_numpy_change_too():
    """Where the direct reads are unavailable (another interpreter's layout),
    get_state() is compared instead: a numpy draw alone is still a change."""
    np.random.seed(0)  # no cached gaussian
    rec = R.Recorder()
    rec._py_addr = rec._np_addr = None
    rec.current()
    assert not rec.changed()
    np.random.rand()
    assert rec.changed()
    random.random()
    assert rec.changed()
    after = draws()
    R.restore(rec.blob)
    assert draws() == after


def test_a_quiet_worker_checks_sparsely_and_wakes_up_on_a_change():
    rec = R.Recorder()
    rec.current()
    for _ in range(R.Recorder.QUIET_BATCHES):
        assert not rec.after_batch()
    assert rec._sparse
    random.random()
    found = [rec.after_batch() for _ in range(R.Recorder.SPARSE_EVERY)]
    assert found.count(True) == 1 and not rec._sparse


def test_board_lookup_rules():
    board = R.RngBoard(2, 8)
    try:
        board.start_writer(0)
        board.record(0, 0, R.START, b"start")
        board.record(0, 1, R.BEFORE, b"before-1")
        board.record(0, 1, 0, b"after-0")
        board.record(0, 1, 4, b"after-4")        # batch 2 changed nothing: not recorded
        assert board.lookup(0, 1, 0) == b"after-0"
        assert board.lookup(0, 1, 2) == b"after-0"
        assert board.lookup(0, 1, 4) == b"after-4"
        assert board.lookup(0, 1, None) == b"before-1"
        assert board.lookup(0, 2, None) == b"after-4"   # has not started generation 2: its newest
        assert board.newest(0) == b"after-4"
        assert board.lookup(1, 1, 3) is None             # worker 1 recorded nothing
        for b in range(6, 30, 2):                        # the ring wraps: the oldest entries go
            board.record(0, 1, b, f"after-{b}".encode())
        assert board.lookup(0, 1, 29) == b"after-28"
        assert board.lookup(0, 1, 1) is None             # overwritten, and it began generation 1
    finally:
        board.close()
