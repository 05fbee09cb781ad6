"""Language-model data (docs/text.md): token files read natively.

    docs = stoker.text.TokenDataset("data/web_text_document")   # .bin + .idx
    loader = stoker.DataLoader(docs, batch_size=16, shuffle=True, num_workers=2)

A TokenDataset's sample is a document: {"input_ids": a 1-D tensor of its
token ids}; a batch holds a list of them (documents differ in length).  It
is a stoker.io native dataset: read by C++ threads, no Python per document,
a source of a stoker.Mix that stays native, resumable and split between
ranks like any map-style dataset.
"""
from __future__ import annotations

import glob
import os
from typing import Iterable, Optional, Union

import numpy as np

from stoker import _native as N
from stoker.io import NativeDataset, _check_choice

__all__ = ["TokenDataset"]

PathLike = Union[str, os.PathLike]


def _files(paths) -> list:
    """The token files `paths` names: files, Megatron prefixes, directories
    (their .idx/.bin pairs, flat .bin and .npy files, in name order) and
    globs."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            names = sorted(os.listdir(p))
            found = [os.path.join(p, n) for n in names
                     if n.endswith(".npy") or (n.endswith(".bin")) or
                     (n.endswith(".idx") and n[:-4] + ".bin" not in names)]
            if not found:
                raise ValueError(f"TokenDataset: {p} holds no token files (.bin, .idx, .npy)")
            out += found
        elif any(c in p for c in "*?["):
            found = sorted(glob.glob(p))
            if not found:
                raise ValueError(f"TokenDataset: no file matches {p!r}")
            out += [f for f in found if not (f.endswith(".idx") and os.path.exists(f[:-4] + ".bin"))]
        else:
            out.append(p)
    if not out:
        raise ValueError("TokenDataset: no files")
    return out


class TokenDataset(NativeDataset):
    """TokenDataset(paths, *, dtype=None, eos_id=None, vocab_size=None,
    output_dtype="int64", on_error="raise")

    paths: token files, one dataset (their documents one file after
    another): Megatron's indexed datasets (a .bin and its .idx, named by
    either or by their prefix; every integer dtype Megatron writes; a
    document is a Megatron sequence), flat token files (a .bin with no .idx:
    uint16 or uint32 tokens, nanoGPT's; dtype= says which) and .npy (a 1-D
    integer array); a directory (its files in name order) or a glob.
    eos_id: flat and .npy files end a document after each eos_id (None:
    each file is one document).  vocab_size: a token outside [0, vocab_size)
    is an error naming the file, the document and the byte (on_error="skip":
    the document is skipped and counted in stats()).  output_dtype: "int64"
    or "int32".
    """

    def __init__(self, paths: Union[PathLike, Iterable[PathLike]], *, dtype: Optional[str] = None,
                 eos_id: Optional[int] = None, vocab_size: Optional[int] = None, output_dtype: str = "int64",
                 on_error: str = "raise"):
        _check_choice("output_dtype", output_dtype, ("int64", "int32"))
        _check_choice("on_error", on_error, ("raise", "skip"))
        if dtype is not None:
            _check_choice("dtype", dtype, ("uint16", "uint32"))
        for name, v in (("eos_id", eos_id), ("vocab_size", vocab_size)):
            if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0):
                raise ValueError(f"TokenDataset: {name} should be an int >= 0 or None, got {v!r}")
        self._kwargs = dict(paths=_files(paths), dtype=dtype, eos_id=eos_id, vocab_size=vocab_size,
                            output_dtype=output_dtype, on_error=on_error)
        self._native = N.lib.NativeDataset.open_tokens(
            self._kwargs["paths"], dtype or "", -1 if eos_id is None else int(eos_id), int(vocab_size or 0),
            output_dtype, on_error)
        self._counts = None

    def _token_counts(self):
        if self._counts is None:
            self._counts = N.lib.NativeDataset.token_counts(self._native)
        return self._counts

    @property
    def tokens(self) -> int:
        """The tokens of every document."""
        return int(self._token_counts()[0])

    @property
    def document_lengths(self) -> np.ndarray:
        """Each document's tokens (uint32)."""
        return self._token_counts()[1]

    def __reduce__(self):
        return _reopen, (self._kwargs,)


def _reopen(kwargs: dict) -> TokenDataset:
    return TokenDataset(**kwargs)
