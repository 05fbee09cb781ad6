"""Exceptions stoker raises in the training loop, the report a worker
sends back when its code raises, and where stoker's warnings point."""
from __future__ import annotations

import pickle
import signal
import sys
import traceback

_LIBRARIES = ("stoker", "accelerate", "torch", "lightning", "pytorch_lightning")


def user_stacklevel() -> int:
    """warnings.warn's stacklevel, from the function that calls this, that
    names the user's line: the first frame outside stoker and the
    frameworks that call it (accelerator.prepare's call, not accelerate's
    own line inside it)."""
    level, frame = 1, sys._getframe(1)  # stacklevel 1: the warning's caller
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not any(name == p or name.startswith(p + ".") for p in _LIBRARIES):
            return level
        frame, level = frame.f_back, level + 1
    return 1

# Reports must fit in the smallest slot region (64 KiB) with room to spare.
_MAX_REPORT_TEXT = 48 * 1024


class WorkerCrashed(RuntimeError):
    """A worker process died (signal or exit) while the loader needed it."""

    def __init__(self, message, *, worker_id=None, pid=None, signal=None, exit_code=None, indices=None,
                 oom=False):
        super().__init__(message)
        self.oom = oom
        self.worker_id = worker_id
        self.pid = pid
        self.signal = signal
        self.exit_code = exit_code
        self.indices = indices


class LoaderTimeout(RuntimeError):
    """No batch arrived within the loader's `timeout`."""


def describe_exit(signal_number: int, exit_code: int) -> str:
    if signal_number:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        return f"killed by signal {signal_number} ({name})"
    if exit_code < 0:
        return "exited (its status is unknown: it is not a child of this process)"
    return f"exited with code {exit_code}"


def short_repr(obj, limit: int = 200) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ErrorReport:
    """What a worker sends when the user's code raises: the exception type, the
    formatted traceback and where it happened.  Re-raised in the main process
    as the original type, like torch's ExceptionWrapper."""

    def __init__(self, exc: BaseException, where: str):
        self.exc_type = type(exc)
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if len(text) > _MAX_REPORT_TEXT:
            text = text[: _MAX_REPORT_TEXT // 2] + "\n[... traceback truncated ...]\n" + text[-_MAX_REPORT_TEXT // 2:]
        self.exc_msg = text
        self.where = where

    def to_bytes(self) -> bytes:
        try:
            data = pickle.dumps(self)
            pickle.loads(data)  # the type must be importable on the other side
            return data
        except Exception:
            self.exc_msg = f"{self.exc_type.__module__}.{self.exc_type.__qualname__}: " + self.exc_msg
            self.exc_type = RuntimeError
            return pickle.dumps(self)

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        try:
            raise exception
        finally:
            # A local holding the exception would make a cycle (exception ->
            # traceback -> this frame -> exception) that keeps the iterator,
            # and so its workers, alive until the cyclic GC runs.
            del exception


class _KeyErrorMessage(str):
    """KeyError repr()s its argument; keep the traceback readable."""

    def __repr__(self):
        return self
