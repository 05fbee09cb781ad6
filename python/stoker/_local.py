"""num_workers=0: the iterator loads each batch in this process, fetching
and collating straight into a slot of its engine, as a worker would."""
from __future__ import annotations

import os
import pickle

from stoker import _native as N
from stoker._worker import (_COLLATE, _INDICES, _ITER_BATCH, _ITER_ITEM, WorkerConfig, _default_collate_py,
                            _Fetcher, prepare_batch, publish_prepared)
from stoker.errors import short_repr


def next_local(it):
    """The next batch of `it` (a _StokerIter without workers); StopIteration
    at the end of the epoch."""
    index = it._next_index()  # raises StopIteration at the end
    while it._delivered_local in it._local_skip:  # delivered before a resume
        it._local_skip.discard(it._delivered_local)
        it._delivered_local += 1
        index = it._next_index()
    it._delivered_local += 1
    if not hasattr(it, "_local_fetch"):
        cfg = WorkerConfig(arena=None, worker_id=0, num_workers=0, dataset=it._dataset,
                           is_iterable=it._is_iterable, auto_collation=it._auto_collation,
                           collate_fn=it._wcollate, convert=it._convert, drop_last=it._drop_last,
                           base_seed=it._base_seed, worker_init_fn=None, numpy_mode=it._numpy,
                           parent_pid=os.getpid(), skip_items=it._iter_skip[0] if it._iter_skip else 0,
                           sample_seed=it._sample_seed,
                           epoch_of=lambda: max(0, getattr(it._loader_ref(), "_epoch", None) or 0))
        it._local_cfg = cfg
        it._local_fetch = _Fetcher(cfg)
    if it._is_iterable:
        kind, payload = (_ITER_BATCH, len(index)) if it._auto_collation else (_ITER_ITEM, None)
    else:
        kind, payload = _INDICES, index
    data = it._local_fetch.fetch(kind, payload)
    out = _LocalPort(it._engine, it._numpy)
    prepared = prepare_batch(data, it._local_cfg)  # the user's collate_fn: its errors are its own
    try:
        publish_prepared(out, 0, prepared, it._local_cfg)
    except MemoryError as e:
        where = f"batch {it._num_yielded}" + ("" if it._is_iterable else f" (indices {short_repr(index, 120)})")
        raise MemoryError(f"{e} (while loading {where})") from None
    except (pickle.PicklingError, AttributeError) as e:
        # A slot stores some objects as a pickle (a namedtuple's class, an
        # object of no known kind).  In this process nothing has to cross:
        # a class that cannot be pickled (defined in a function, or under
        # another name) is handed over as it is, as torch does.
        if isinstance(e, AttributeError) and "pickle" not in str(e):
            raise
        obj, mode = prepared
        return _default_collate_py(obj, it._numpy) if mode == _COLLATE else obj
    return out.result


class _LocalPort:
    """The WorkerPort interface for in-process loading: publish() collates into
    a slot of the local engine and decodes the result right away."""

    def __init__(self, engine, numpy_mode):
        self._engine = engine
        self.result = None

    def publish(self, _slot, obj, mode, numpy_mode):
        out = self._engine.fill_local(obj, mode, numpy_mode)
        if out is None:
            return N.PublishOutcome.FALLBACK
        self.result = out
        return N.PublishOutcome.PUBLISHED
