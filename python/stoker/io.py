"""Native datasets: samples read by C++ threads straight into the slot pool.

    loader = stoker.DataLoader(stoker.io.TFRecordDataset("train.tfrecord",
                                   features={"x": ("float32", (1000,)), "y": ("int64", ())}),
                               batch_size=8, shuffle=True, num_workers=2)

With stoker.DataLoader and the default collate, `num_workers` counts C++
threads, not processes: each reads its batch's records into the slot with
no Python and no GIL on the way (decoding, CRC checks and native transforms
included).  Any other use (torch's DataLoader, a collate_fn or a Python
transform of yours) goes through __getitem__, which returns numpy arrays,
in worker processes as usual.

Datasets: RawDataset (fixed-size records in a flat file), NpyDataset (one
.npy file along axis 0, or a directory of .npy files), TFRecordDataset
(tf.train.Example records), TarShardDataset (WebDataset-style tar shards).
Transforms of arrays (dataset.map(...)): Cast, ArrayNormalize, Crop,
ArrayRandomCrop, Flip, Reshape, ArrayCompose.  (stoker.vision's Normalize,
RandomCrop and Compose are torchvision's, for images; these three were called
Normalize, RandomCrop and Compose too, and those names still work here, with a
DeprecationWarning.)  Writers: write_tfrecord, write_tar_shards (and the
`stoker pack` command).
"""
from __future__ import annotations

import glob
import io as _io
import os
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from stoker import _native as N

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover - numpy-only use
    _Base = object

__all__ = ["NativeDataset", "RawDataset", "NpyDataset", "TFRecordDataset", "TarShardDataset",
           "Cast", "ArrayNormalize", "Crop", "ArrayRandomCrop", "Flip", "Reshape", "ArrayCompose", "MappedDataset",
           "write_tfrecord", "write_tar_shards"]

_IO_MODES = ("pread", "mmap", "direct")


def _paths(paths, what: str, in_dir: tuple = ()) -> list[str]:
    """A path, a glob pattern, or a list of those, as a list of paths; with
    `in_dir` (file name endings), a directory is its files of those endings,
    in name order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if in_dir and os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(in_dir))
            if not found:
                raise FileNotFoundError(f"{what}: {p} holds no {', '.join(in_dir)} files")
            out.extend(found)
        elif any(c in p for c in "*?["):
            found = sorted(glob.glob(p))
            if not found:
                raise FileNotFoundError(f"{what}: no files match {p!r}")
            out.extend(found)
        else:
            out.append(p)
    if not out:
        raise ValueError(f"{what}: no files given")
    return out


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}")


def _feature_specs(features, what: str) -> list[tuple]:
    """TFRecord features {name: (dtype, shape)} as [(name, dtype name, shape)]."""
    if not isinstance(features, Mapping) or not features:
        raise ValueError(f"{what}: features must be a dict name -> (dtype, shape), e.g. "
                         "{'x': ('float32', (1000,)), 'y': ('int64', ())}")
    feats = []
    for name, spec in features.items():
        try:
            dtype, shape = spec
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: feature {name!r}: expected (dtype, shape), got {spec!r}") from None
        feats.append((str(name), np.dtype(dtype).name, list(shape)))
    return feats


def _tar_decls(fields, what: str) -> list[tuple]:
    """Tar fields {ext: "npy" | "int" | "bytes" | (dtype, shape)} as
    [(ext, kind, dtype name, shape)]; None: [] (inferred)."""
    decls = []
    for ext, spec in (fields or {}).items():
        if isinstance(spec, str):
            _check_choice(f"fields[{ext!r}]", spec, ("npy", "int", "bytes"))
            decls.append((str(ext), spec, "", []))
        else:
            try:
                dtype, shape = spec
                shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: field {ext!r}: expected 'npy', 'int', 'bytes' or "
                                 f"(dtype, shape), got {spec!r}") from None
            decls.append((str(ext), "raw", np.dtype(dtype).name, list(shape)))
    return decls


def _field_value(data: bytes, dtype: str, shape, variable: bool):
    """One field of a sample read in Python: a numpy array; a variable field
    of bytes (uint8: a tar member's) as its raw bytes (default_collate makes
    a list of them; stoker's native batches hold a list of uint8 tensors) or
    its str (a Parquet string column's: `read` made it), of another dtype (a
    document's token ids) as a 1-D array."""
    if variable:
        return data if dtype == "uint8" else np.frombuffer(data, dtype=dtype).copy()
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def __getattr__(name: str):
    # stoker.io.ParquetDataset lives in stoker.parquet, which builds on this
    # module (and needs pyarrow, loaded only when Parquet is read): a name
    # looked up on first use, not a dependency of this module's.
    if name in ("ParquetDataset", "RowGroupSampler"):
        import importlib
        return getattr(importlib.import_module("stoker.parquet"), name)
    raise AttributeError(f"module 'stoker.io' has no attribute {name!r}")


def source_of(dataset, kind):
    """The dataset of type `kind` under `dataset` (itself, or through
    MappedDataset and native transforms), or None."""
    for _ in range(16):
        if isinstance(dataset, kind):
            return dataset
        if isinstance(dataset, MappedDataset):
            dataset = dataset.base
        elif isinstance(dataset, NativeDataset) and getattr(dataset, "_args", None) and \
                isinstance(dataset._args[0], NativeDataset):
            dataset = dataset._args[0]  # a native transform over it
        else:
            return None
    return None


class NativeDataset(_Base):
    """Base of the datasets stoker reads natively."""

    _native = None

    def __len__(self) -> int:
        return len(self._native)

    def __getitem__(self, index: int):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {self._native.describe()} ({len(self)} records)")
        parts = self._native.read(int(index))
        fields = self._native.fields
        arrays = []
        for b, (_name, dtype, shape, variable) in zip(parts, fields):
            arrays.append(_field_value(b, dtype, shape, variable))
        if len(fields) == 1 and not fields[0][0]:
            return arrays[0]
        return {f[0]: a for f, a in zip(fields, arrays)}

    def __repr__(self):
        return f"stoker.io.{type(self).__name__}({self._native.describe()}, {len(self)} records)"

    @property
    def fields(self) -> list[tuple]:
        """(name, dtype, shape, variable) per field."""
        return [tuple(f) for f in self._native.fields]

    @property
    def skipped(self) -> int:
        """Bad records skipped so far (on_error="skip"), in this process."""
        return self._native.skipped

    @property
    def last_skipped(self) -> str:
        """Why the last skipped record was bad."""
        return self._native.last_skipped

    def set_epoch(self, epoch: int) -> None:
        """The epoch random transforms depend on (stoker.DataLoader.set_epoch calls it)."""
        self._native.set_epoch(int(epoch))

    def map(self, transform, field: str | None = None, seed: int = 0):
        """This dataset with `transform` (a native transform, an ArrayCompose of
        them, or any callable) applied to `field` (None: the only field).
        All-native: still a NativeDataset, read by C++ threads.  With a
        Python callable in it: a MappedDataset, loaded by worker processes."""
        steps = transform.steps if isinstance(transform, ArrayCompose) else [transform]
        native: list[_Transform] = []
        for i, s in enumerate(steps):
            if not isinstance(s, _Transform):
                base = self.map(ArrayCompose(native), field, seed) if native else self
                return MappedDataset(base, ArrayCompose(steps[i:]), field)
            native.append(s)
        if field is None:
            names = [f[0] for f in self._native.fields]
            if len(names) != 1:
                raise ValueError(f"{self._native.describe()} has fields {names}: say which with field=")
            field = names[0]
        return _TransformedDataset(self, [(field, native)], seed)

    # Pickled (for spawn workers, when the Python path is used) by its arguments.
    def __reduce__(self):
        return type(self), self._args


class RawDataset(NativeDataset):
    """RawDataset(path, dtype, shape, io="pread"): fixed-size records of
    `shape` elements of `dtype` ("float32", "uint8", ...) from byte 0 to the
    end of the file.  io: "pread", "mmap" or "direct" (O_DIRECT)."""

    def __init__(self, path: str | os.PathLike, dtype: str, shape: Sequence[int], io: str = "pread"):
        _check_choice("io", io, _IO_MODES)
        dtype = np.dtype(dtype).name
        self._args = (os.fspath(path), dtype, tuple(int(d) for d in shape), io)
        self._native = N.lib.NativeDataset.open_raw(self._args[0], dtype, list(self._args[2]), io)


class NpyDataset(NativeDataset):
    """NpyDataset(path, io="pread"): one .npy file (C order, little-endian),
    indexed along axis 0, read with pread or a memory mapping (io="mmap";
    nothing loaded up front); or a directory of .npy files, one sample each,
    in name order (all of one dtype and shape)."""

    def __init__(self, path: str | os.PathLike, io: str = "pread"):
        _check_choice("io", io, _IO_MODES)
        self._args = (os.fspath(path), io)
        if os.path.isdir(self._args[0]):
            self._native = N.lib.NativeDataset.open_npy_dir(self._args[0])
        else:
            self._native = N.lib.NativeDataset.open_npy(self._args[0], io)


class TFRecordDataset(NativeDataset):
    """TFRecordDataset(paths, features, index_dir=None, verify_crc=True,
    io="mmap", on_error="raise"): tf.train.Example records.

    paths: a file, a glob pattern, or a list of them.  features: name ->
    (dtype, shape), e.g. {"x": ("float32", (1000,)), "y": ("int64", ())};
    float_list features fill float dtypes, int64_list integer ones (range
    checked), bytes_list any dtype (the raw bytes, e.g. array.tobytes()).
    Batches are dicts of tensors.  Each file's index (record offsets) is built
    on first use and kept beside it (<file>.stoker-index) or, where that
    directory is read-only, in ~/.cache/stoker/index; index_dir= puts them
    there instead.  on_error="skip": bad records (bad CRC, wrong feature type
    or shape, a damaged file tail) are left out of their batch and counted in
    `skipped` (and loader.stats()) instead of raising.  io: "mmap" (the
    default: each record's CRC is computed while its values are copied out
    of the page cache, one pass), "pread" or "direct" (O_DIRECT)."""

    def __init__(self, paths, features: Mapping[str, tuple], index_dir: str | os.PathLike | None = None,
                 verify_crc: bool = True, io: str = "mmap", on_error: str = "raise"):
        _check_choice("io", io, _IO_MODES)
        _check_choice("on_error", on_error, ("raise", "skip"))
        files = _paths(paths, "TFRecordDataset")
        feats = _feature_specs(features, "TFRecordDataset")
        idx = "" if index_dir is None else os.fspath(index_dir)
        self._args = (files, dict(features), index_dir, verify_crc, io, on_error)
        self._native = N.lib.NativeDataset.open_tfrecord(files, feats, idx, bool(verify_crc), io, on_error)

    @property
    def index_paths(self) -> list[str]:
        """Where each file's index was loaded from or saved to ("" if nowhere)."""
        return list(self._native.index_paths)


class TarShardDataset(NativeDataset):
    """TarShardDataset(paths, fields=None, io="pread", on_error="raise"):
    WebDataset-style tar shards.  Members are grouped into samples by key (the
    path up to the first '.' of the file name); each extension is a field:
    "npy" (a .npy member: its dtype and shape, alike in every sample), "int"
    (an ASCII integer, as WebDataset's .cls: int64), "bytes" (any bytes: a
    uint8 tensor per sample, of its own length; a batch holds a list of them)
    or (dtype, shape) (raw bytes of that dtype and shape).  fields=None
    infers them from the first sample (.npy -> "npy", .cls/.label/.idx/.id ->
    "int", the rest "bytes").  A member with an absolute path, a '..' part or
    a link is a bad member: an error, or skipped and counted with
    on_error="skip"."""

    def __init__(self, paths, fields: Mapping[str, Any] | None = None, io: str = "pread", on_error: str = "raise"):
        _check_choice("io", io, _IO_MODES)
        _check_choice("on_error", on_error, ("raise", "skip"))
        files = _paths(paths, "TarShardDataset")
        decls = _tar_decls(fields, "TarShardDataset")
        self._args = (files, None if fields is None else dict(fields), io, on_error)
        self._native = N.lib.NativeDataset.open_tar(files, decls, io, on_error)


# ---- transforms --------------------------------------------------------------

class _Transform:
    """A native transform: runs in the C++ reader threads."""

    def __init__(self, *args):
        self._args = args
        self._native = self._make(*args)

    def __reduce__(self):
        return type(self), self._args

    def __repr__(self):
        return f"stoker.io.{type(self).__name__}{self._args!r}"

    def __call__(self, x):
        """Applies to one numpy array (after a Python step of an ArrayCompose, or
        outside stoker); random steps draw from numpy's global generator."""
        a = np.ascontiguousarray(x)
        dtype, shape, data = self._native.apply(a.dtype.name, list(a.shape), a.tobytes(),
                                                int(np.random.randint(0, 2**63 - 1, dtype=np.int64)))
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


class Cast(_Transform):
    """Cast(dtype): element-wise conversion (floats to integers saturate)."""

    def __init__(self, dtype):
        super().__init__(np.dtype(dtype).name)

    @staticmethod
    def _make(dtype):
        return N.lib.Transform.cast(dtype)


class ArrayNormalize(_Transform):
    """ArrayNormalize(mean, std, axis=0): (x - mean[c]) / std[c], c the index
    along `axis` (scalars: every element); float32 out (float64 stays)."""

    def __init__(self, mean, std, axis: int = 0):
        mean = [float(v) for v in np.atleast_1d(mean)]
        std = [float(v) for v in np.atleast_1d(std)]
        super().__init__(mean, std, int(axis))

    @staticmethod
    def _make(mean, std, axis):
        return N.lib.Transform.normalize(mean, std, axis)


class Crop(_Transform):
    """Crop(offset, size): the window [offset, offset+size) of the last
    len(size) dimensions (e.g. size=(224, 224) of a CHW image)."""

    def __init__(self, offset, size):
        super().__init__(tuple(int(v) for v in offset), tuple(int(v) for v in size))

    @staticmethod
    def _make(offset, size):
        return N.lib.Transform.crop(list(offset), list(size))


class ArrayRandomCrop(_Transform):
    """ArrayRandomCrop(size): a window of `size` of the last len(size) dimensions
    at an offset drawn from (seed, epoch, sample index)."""

    def __init__(self, size):
        super().__init__(tuple(int(v) for v in size))

    @staticmethod
    def _make(size):
        return N.lib.Transform.random_crop(list(size))


class Flip(_Transform):
    """Flip(axis=-1, p=0.5): reverses `axis` with probability p (drawn from
    (seed, epoch, sample index)); p=1 always."""

    def __init__(self, axis: int = -1, p: float = 0.5):
        super().__init__(int(axis), float(p))

    @staticmethod
    def _make(axis, p):
        return N.lib.Transform.flip(axis, p)


class Reshape(_Transform):
    """Reshape(shape): same elements, new shape (one -1 is inferred)."""

    def __init__(self, shape):
        super().__init__(tuple(int(v) for v in shape))

    @staticmethod
    def _make(shape):
        return N.lib.Transform.reshape(list(shape))


class ArrayCompose:
    """ArrayCompose([t1, t2, ...]): applies the steps in order.  Native steps
    stay in C++; a Python callable anywhere moves it and what follows to
    worker processes (dataset.map returns a MappedDataset then)."""

    def __init__(self, steps: Iterable):
        self.steps = list(steps)
        for s in self.steps:
            if not callable(s):
                raise TypeError(f"ArrayCompose: {s!r} is not a transform or a callable")

    def __call__(self, x):
        for s in self.steps:
            x = s(x)
        return x

    def __repr__(self):
        return f"stoker.io.ArrayCompose({self.steps!r})"


def _renamed(old: str, new):
    """The old name of a transform: makes the new one, with a DeprecationWarning."""
    def make(*args, **kwargs):
        import warnings
        from stoker.errors import user_stacklevel
        warnings.warn(f"stoker.io.{old} is now stoker.io.{new.__name__} (stoker.vision.{old} is torchvision's, "
                      f"for images)", DeprecationWarning, stacklevel=user_stacklevel())
        return new(*args, **kwargs)
    make.__name__ = make.__qualname__ = old
    make.__doc__ = f"The old name of {new.__name__} (deprecated)."
    return make


Normalize = _renamed("Normalize", ArrayNormalize)
RandomCrop = _renamed("RandomCrop", ArrayRandomCrop)
Compose = _renamed("Compose", ArrayCompose)


class _TransformedDataset(NativeDataset):
    """A native dataset with native transforms on some fields."""

    def __init__(self, base: NativeDataset, chains: list, seed: int):
        if isinstance(base, _TransformedDataset):  # extend its chains
            chains = base._args[1] + chains
            seed = base._args[2] if seed == 0 else seed
            base = base._args[0]
        self._args = (base, chains, int(seed))
        native_chains = [(field, [t._native for t in steps]) for field, steps in chains]
        self._native = N.lib.NativeDataset.transform(base._native, native_chains, int(seed))

    def __repr__(self):
        steps = "; ".join(f"{f or 'the field'}: {[repr(t) for t in s]}" for f, s in self._args[1])
        return f"stoker.io.NativeDataset({self._native.describe()} with {steps}, {len(self)} records)"


class MappedDataset(_Base):
    """A dataset with a Python transform: base[i] (native steps already
    applied), then `transform` on `field` (None: the whole sample).  Read in
    worker processes like any torch Dataset."""

    def __init__(self, base, transform: Callable, field: str | None = None):
        self.base, self.transform, self.field = base, transform, field

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        sample = self.base[i]
        if self.field is None or not isinstance(sample, dict):
            return self.transform(sample)
        sample = dict(sample)
        sample[self.field] = self.transform(sample[self.field])
        return sample

    def set_epoch(self, epoch: int):
        fn = getattr(self.base, "set_epoch", None)
        if fn is not None:
            fn(epoch)


# ---- writers -------------------------------------------------------------------

def _feature(name: str, value) -> tuple:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return (name, "bytes", [bytes(value)])
    if isinstance(value, str):
        return (name, "bytes", [value.encode()])
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (bytes, bytearray)) for v in value):
        return (name, "bytes", [bytes(v) for v in value])
    a = np.asarray(value)
    if a.dtype.kind == "f":
        return (name, "float", np.ascontiguousarray(a, dtype=np.float32).reshape(-1))
    if a.dtype.kind in "iub":
        if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
            raise ValueError(f"feature {name!r}: uint64 values above 2**63-1 do not fit an int64_list")
        return (name, "int64", np.ascontiguousarray(a, dtype=np.int64).reshape(-1))
    raise TypeError(f"feature {name!r}: cannot store {type(value).__name__} of dtype {a.dtype} "
                    "(floats, integers, bools, bytes or str)")


def write_tfrecord(path: str | os.PathLike, samples: Iterable[Mapping[str, Any]]) -> int:
    """Writes `samples` (dicts name -> value) as tf.train.Example records to
    `path` and returns how many.  Floats become float_list (as float32),
    integers and bools int64_list, bytes/str bytes_list.  The file appears
    whole (temporary name, fsync, rename) or not at all."""
    w = N.lib.TFRecordWriter(os.fspath(path))
    for i, s in enumerate(samples):
        if not isinstance(s, Mapping):
            raise TypeError(f"write_tfrecord: sample {i} is a {type(s).__name__}, not a dict of features")
        w.write([_feature(str(k), v) for k, v in s.items()])
    w.close()
    return w.records


def _member_bytes(ext: str, value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value)).encode()
    a = np.asarray(value)
    if ext.rsplit(".", 1)[-1] == "npy":
        buf = _io.BytesIO()
        np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
        return buf.getvalue()
    return np.ascontiguousarray(a).tobytes()


def write_tar_shards(pattern: str | os.PathLike, samples: Iterable[Mapping[str, Any]],
                     maxcount: int = 10000, maxsize: int = 1 << 30) -> list[str]:
    """Writes `samples` into WebDataset-style tar shards and returns their
    paths.  pattern: "out/train-%06d.tar" (a printf pattern numbering the
    shards).  Each sample is a dict extension -> value ("__key__" names it,
    else its number): arrays under an extension ending in "npy" are saved as
    .npy, other arrays as raw bytes, ints as ASCII (WebDataset's .cls), str as
    UTF-8, bytes as they are.  A shard closes after maxcount samples or
    maxsize bytes; each appears whole (temporary name, fsync, rename)."""
    pattern = os.fspath(pattern)
    try:
        pattern % 0
    except TypeError:
        raise ValueError(f"write_tar_shards: pattern {pattern!r} needs one %d-style field for the shard number") from None
    if maxcount < 1 or maxsize < 1:
        raise ValueError("write_tar_shards: maxcount and maxsize must be >= 1")
    out: list[str] = []
    cur = None
    count = size = 0

    def close():
        nonlocal cur
        if cur is None:
            return
        f, path = cur
        f.write(N.lib.tar_end())
        f.commit()
        out.append(path)
        cur = None

    try:
        for i, s in enumerate(samples):
            if not isinstance(s, Mapping):
                raise TypeError(f"write_tar_shards: sample {i} is a {type(s).__name__}, not a dict")
            key = str(s.get("__key__", f"{i:09d}"))
            members = [N.lib.tar_member(f"{key}.{ext}", _member_bytes(ext, v))
                       for ext, v in s.items() if ext != "__key__"]
            nbytes = sum(len(m) for m in members)
            if cur is not None and (count >= maxcount or size + nbytes > maxsize):
                close()
            if cur is None:
                path = pattern % len(out)
                cur = (N.lib.AtomicFile(path), path)
                count = size = 0
            for m in members:
                cur[0].write(m)
            count += 1
            size += nbytes
        close()
    finally:
        if cur is not None:  # an error: leave no partial shard
            cur[0].abort()
    return out
