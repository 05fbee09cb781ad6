"""Language-model data (docs/text.md): token files read natively.

    docs = stoker.text.TokenDataset("data/web_text_document")   # .bin + .idx
    loader = stoker.DataLoader(docs, batch_size=16, shuffle=True, num_workers=2)

A TokenDataset's sample is a document: {"input_ids": a 1-D tensor of its
token ids}; a batch holds a list of them (documents differ in length).  It
is a stoker.io native dataset: read by C++ threads, no Python per document,
a source of a stoker.Mix that stays native, resumable and split between
ranks like any map-style dataset.

    seqs = stoker.text.Pack(docs, seq_len=2048, mode="best_fit")
    loader = stoker.DataLoader(seqs, batch_size=8, shuffle=True, num_workers=2)

A Pack's sample is a packed sequence: input_ids, labels, position_ids and
document_ids of seq_len tokens, and its cu_seqlens (stoker.text.cu_seqlens
makes a batch's, for variable-length attention).  Packed in C++ as the
loader reads; the plan of which document pieces make each sequence is made
when the Pack is, from the documents' lengths alone.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional, Union

import numpy as np

from stoker import _native as N
from stoker.io import NativeDataset, _check_choice, _paths

from stoker.text_json import TextDataset, collate_documents  # noqa: E402  (raw text, tokenized as it is read)
from stoker.text_stream import PackedStream  # noqa: E402  (a Pack of a TextDataset)

__all__ = ["TokenDataset", "Pack", "PackedStream", "cu_seqlens", "TextDataset", "collate_documents"]

PathLike = Union[str, os.PathLike]


def _files(paths) -> list:
    """The token files `paths` names: files, Megatron prefixes, directories
    (their .bin, .idx and .npy files, in name order) and globs; an .idx
    whose .bin is named too stands with it."""
    out = _paths(paths, "TokenDataset", in_dir=(".bin", ".idx", ".npy"))
    named = set(out)
    return [f for f in out if not (f.endswith(".idx") and f[:-4] + ".bin" in named)]


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


class Pack(NativeDataset):
    """Pack(dataset, seq_len, mode="concat", *, window=1024, eos_id=None,
    pad_id=0, shuffle=True, seed=0, repack=False, block_documents=2048)

    dataset: a TokenDataset, or a stoker.Mix of TokenDatasets (the mix's
    order of documents, so its proportions hold along the packed stream).
    A TextDataset (text tokenized as it is read), or a TokenDataset with
    repack=True (packed again each epoch), makes a PackedStream instead:
    packed block by block of `block_documents` as the loader reads
    (stoker/text_stream.py, docs/text.md).
    mode: "concat" (the documents as one stream cut every seq_len tokens:
    no padding but the last sequence's, every token once) or "best_fit"
    (documents kept whole, one longer than seq_len cut into seq_len pieces
    and a rest; each into the open sequence it fills most tightly among
    `window` open ones, the fullest closed when none has room).  eos_id:
    appended after every document (None: the documents end as they are,
    e.g. a flat file split at its eos_id).  pad_id: the padding's token
    (its labels are -100).  shuffle/seed: the order the documents are packed
    in (a keyed permutation of the seed; a Mix's own order for a Mix).  The
    packing is fixed when the Pack is made; the loader's shuffle=True
    shuffles the packed sequences per epoch, and resumes them exactly on any
    topology like any map-style dataset (the state holds positions, never
    tokens).

    Sample i: {"input_ids", "labels", "position_ids", "document_ids"}: int64
    [seq_len] each (labels: the next token in the same document, -100 after
    a document's end and on padding; position_ids restart at each
    document's piece; document_ids: the dataset's document index, -1 on
    padding) and "cu_seqlens": int32, the sequence's segment boundaries.
    """

    def __new__(cls, dataset=None, seq_len: int = 0, mode: str = "concat", *, window: int = 1024,
                eos_id: Optional[int] = None, pad_id: int = 0, shuffle: bool = True, seed: int = 0,
                repack: bool = False, block_documents: int = 2048):
        if not (isinstance(dataset, TextDataset) or (repack and isinstance(dataset, TokenDataset))):
            if repack:
                raise TypeError(f"Pack: repack=True packs a TokenDataset again each epoch, not a "
                                f"{type(dataset).__name__}")
            return super().__new__(cls)
        # Text tokenized as it is read: packed block by block (stoker/text_stream.py).
        _check_pack(seq_len, mode, window, pad_id, eos_id)
        return PackedStream(dataset, int(seq_len), mode, window=window, eos_id=eos_id, pad_id=pad_id,
                            shuffle=shuffle, seed=seed, block_documents=block_documents)

    def __init__(self, dataset, seq_len: int, mode: str = "concat", *, window: int = 1024,
                 eos_id: Optional[int] = None, pad_id: int = 0, shuffle: bool = True, seed: int = 0,
                 repack: bool = False, block_documents: int = 2048):
        from stoker.mix import Mix
        _check_pack(seq_len, mode, window, pad_id, eos_id)
        if isinstance(dataset, Mix):
            sources = dataset.sources
            order = dataset._epoch_order(0, bool(shuffle))
        elif isinstance(dataset, TokenDataset):
            sources = [dataset]
            order = (N.lib.feistel_order(len(dataset), int(seed) & 0xFFFF_FFFF_FFFF_FFFF, 0) if shuffle
                     else N.lib.iota_order(len(dataset)))
        else:
            raise TypeError(f"Pack: packs a stoker.text.TokenDataset, a stoker.Mix of them or a TextDataset, not "
                            f"{type(dataset).__name__}")
        for i, s in enumerate(sources):
            if not isinstance(s, TokenDataset):
                raise TypeError(f"Pack: source {i} of the Mix is a {type(s).__name__}, not a stoker.text.TokenDataset")
        docs = np.frombuffer(order.read(0, len(order)), dtype=np.int64).astype(np.uint64)
        self._args = (dataset, seq_len, mode, dict(window=window, eos_id=eos_id, pad_id=pad_id, shuffle=shuffle,
                                                   seed=seed))
        self.seq_len, self.mode = int(seq_len), mode
        self._native = N.lib.NativeDataset.packed([s._native for s in sources], docs, int(seq_len), mode, int(window),
                                                  -1 if eos_id is None else int(eos_id), int(pad_id))
        self.sequences, self.tokens, self.pieces = N.lib.NativeDataset.pack_counts(self._native)

    @property
    def padding_fraction(self) -> float:
        """The share of the sequences' places that are padding."""
        return 1.0 - self.tokens / max(1, self.sequences * self.seq_len)

    def __reduce__(self):
        dataset, seq_len, mode, kw = self._args
        return _repack, (dataset, seq_len, mode, kw)


def _check_pack(seq_len, mode, window, pad_id, eos_id):
    _check_choice("mode", mode, ("concat", "best_fit"))
    for name, v, low in (("seq_len", seq_len, 1), ("window", window, 1), ("pad_id", pad_id, 0)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
            raise ValueError(f"Pack: {name} should be an int >= {low}, got {v!r}")
    if eos_id is not None and (not isinstance(eos_id, (int, np.integer)) or eos_id < 0):
        raise ValueError(f"Pack: eos_id should be an int >= 0 or None, got {eos_id!r}")


def _repack(dataset, seq_len, mode, kw) -> Pack:
    return Pack(dataset, seq_len, mode, **kw)


def cu_seqlens(batch) -> "torch.Tensor":
    """A batch of packed sequences' segment boundaries over the batch laid
    end to end (int32, what variable-length attention kernels take, with
    max_seqlen = the largest difference), from each sequence's cu_seqlens."""
    import torch
    per = batch["cu_seqlens"]
    seq_len = batch["input_ids"].shape[-1]
    parts = [torch.as_tensor(c, dtype=torch.int32)[:-1] + k * seq_len for k, c in enumerate(per)]
    return torch.cat(parts + [torch.tensor([len(per) * seq_len], dtype=torch.int32)])
