"""Raw text tokenized as it is read (docs/text.md, "Tokenizing on the fly").

    docs = stoker.text.TextDataset("corpus/*.jsonl", field="text", tokenizer="tokenizer.json")
    loader = stoker.DataLoader(docs, batch_size=64, num_workers=2,
                               collate_fn=stoker.text.collate_documents)

A TextDataset's sample is a document of JSON Lines: {"input_ids": its
tokens}, tokenized by Hugging Face's `tokenizers` (stoker has no tokenizer
of its own).  A worker asked for a batch tokenizes the batch's documents
with one `encode_batch` (torch's fetcher calls __getitems__), which runs
without the GIL on the tokenizer's threads.  Opening a file finds its lines
(a vectorized scan for newlines; blank lines are not documents); a line is
read and parsed when its document is asked for.
"""
from __future__ import annotations

import json
import mmap
import os
from typing import Optional, Sequence

import numpy as np

from stoker.io import _paths

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover
    _Base = object

__all__ = ["TextDataset", "collate_documents"]


def _jsonl_files(paths) -> list:
    out = _paths(paths, "TextDataset", in_dir=(".jsonl", ".jsonl.zst"))
    for p in out:
        if p.endswith(".gz"):
            raise ValueError(f"TextDataset: {p} is gzip; this reads plain or zstd JSON Lines (recompress it with zstd)")
    return out


def _zstd(path: str) -> bool:
    return path.endswith((".zst", ".zstd"))


def _decompressed(path: str) -> int:
    """A zstd file's JSON Lines in an anonymous in-memory file (its fd):
    lines are read from there by offset, as a plain file's are."""
    try:
        import zstandard
    except ImportError:
        raise ImportError(f"TextDataset: {path} is zstd: pip install zstandard to read it") from None
    fd = os.memfd_create("stoker-jsonl", os.MFD_CLOEXEC)
    dctx = zstandard.ZstdDecompressor()
    try:
        with open(path, "rb") as src, open(fd, "wb", closefd=False) as dst:
            frame, fed = dctx.decompressobj(), False
            for chunk in iter(lambda: src.read(1 << 20), b""):
                while chunk:
                    dst.write(frame.decompress(chunk))
                    fed = True
                    if not frame.eof:
                        break
                    chunk = frame.unused_data  # (the next frame's start)
                    frame, fed = dctx.decompressobj(), False
            if fed and not frame.eof:
                raise zstandard.ZstdError("it ends inside a frame: truncated?")
    except zstandard.ZstdError as e:
        os.close(fd)
        raise ValueError(f"TextDataset: {path} is not a whole zstd stream ({e})") from None
    return fd


def _lines(path: str, fd: Optional[int] = None) -> tuple:
    """(starts, ends) of the lines of `path` (or of the file `fd`) holding
    something but blanks."""
    size = os.fstat(fd).st_size if fd is not None else os.path.getsize(path)
    if size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    with open(fd if fd is not None else path, "rb", closefd=fd is None) as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        buf = np.frombuffer(m, dtype=np.uint8)
        nl = np.flatnonzero(buf == 10)
        starts = np.concatenate([[0], nl + 1])
        ends = np.concatenate([nl, [size]])
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        # Lines of blanks only (spaces, tabs, \r) are not documents.  A line
        # whose first byte is not a blank holds something (a JSON line's "{");
        # only the few that start with a blank are looked at whole.
        first = buf[np.minimum(starts, max(size - 1, 0))]
        solid = ~np.isin(first, (9, 13, 32))
        for k in np.flatnonzero(~solid).tolist():
            solid[k] = bool(bytes(buf[starts[k]:ends[k]]).strip(b" \t\r"))
        del buf, first
    return starts[solid].astype(np.int64), ends[solid].astype(np.int64)


class TextDataset(_Base):
    """TextDataset(paths, field="text", tokenizer="tokenizer.json", *,
    eos_id=None, on_error="raise")

    paths: JSON Lines files, plain or zstd (.zst: decompressed into memory
    when opened; a list, a directory of .jsonl/.jsonl.zst, a glob), one
    document a line; or Parquet files (.parquet, or a
    stoker.io.ParquetDataset), one document a row.  field: the key of each
    line's text, or the string column.  tokenizer: a
    Hugging Face tokenizer.json path or a tokenizers.Tokenizer (the ids are
    its encode_batch's, add_special_tokens as it defaults), or a
    SentencePiece .model (its C++ library's batch encode, through the
    sentencepiece package).  eos_id: appended
    to every document.  on_error: "raise" (a line that is not UTF-8, not
    JSON, or has no such text field: an error naming the file, the line and
    its byte offset) or "skip" (the document is left out and counted in
    `skipped`).
    """

    def __init__(self, paths, field: str = "text", tokenizer="tokenizer.json", *, eos_id: Optional[int] = None,
                 on_error: str = "raise"):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error={on_error!r} is not one of 'raise', 'skip'")
        self._kind, self._model = _load_tokenizer(tokenizer)
        self.field, self.eos_id, self.on_error = field, eos_id, on_error
        self._parquet = _parquet_texts(paths, field)
        self.files = self._parquet._args[0] if self._parquet is not None else _jsonl_files(paths)
        self._starts, self._ends = [], []
        self._memfds = {}
        self._first = np.array([0, len(self._parquet)]) if self._parquet is not None else None
        self.skipped = 0
        self._tokenizer = None
        self._fds = None
        self._maps = None  # each file's read-only map, opened as documents are read (_line)
        if self._parquet is not None:
            return
        self._memfds = {i: _decompressed(p) for i, p in enumerate(self.files) if _zstd(p)}
        for i, p in enumerate(self.files):
            s, e = _lines(p, self._memfds.get(i))
            self._starts.append(s)
            self._ends.append(e)
        self._first = np.cumsum([0] + [len(s) for s in self._starts])

    def __len__(self) -> int:
        return int(self._first[-1])

    def _open(self):
        if self._tokenizer is None:
            if self._kind == "hf":
                import tokenizers
                self._tokenizer = tokenizers.Tokenizer.from_str(self._model)
            else:
                import sentencepiece
                self._tokenizer = sentencepiece.SentencePieceProcessor(model_proto=self._model)
            self._fds = dict(self._memfds)  # (a zstd file's memory, inherited by a forked worker)
            self._maps = {}
        return self._tokenizer

    def _encode(self, texts: list) -> list:
        tok = self._open()
        if self._kind == "hf":
            # encode_batch_fast (tokenizers >= 0.20): encode_batch's ids without
            # the character offsets, which nothing here reads.
            encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
            return [e.ids for e in encode(texts)]
        return tok.encode(texts, out_type=int)

    def _where(self, index: int) -> tuple:
        if not 0 <= index < len(self):
            raise IndexError(f"TextDataset: document {index} of {len(self)}")
        f = int(np.searchsorted(self._first, index, side="right") - 1)
        j = index - int(self._first[f])
        return f, j

    def _text(self, index: int) -> Optional[str]:
        self._open()
        if self._parquet is not None:
            self._where(index)
            try:
                return self._parquet[index][self.field]
            except ValueError as e:  # (a null: the file, row group, column and row named)
                if self.on_error == "skip":
                    self.skipped += 1
                    return None
                raise ValueError(f"TextDataset: {e}") from None
        f, j = self._where(index)
        start = int(self._starts[f][j])
        raw = self._line(f, j)
        where = f"{self.files[f]}, document {j} ({'decompressed ' if f in self._memfds else ''}byte {start})"
        try:
            text = json.loads(raw.decode("utf-8"))[self.field]
            if not isinstance(text, str):
                raise TypeError(f"its {self.field!r} is a {type(text).__name__}, not text")
            return text
        except UnicodeDecodeError as e:
            why = f"is not UTF-8 (byte {start + e.start}: {raw[e.start:e.start + 4]!r})"
        except json.JSONDecodeError as e:
            why = f"is not JSON ({e.msg} at byte {start + e.pos})"
        except (KeyError, TypeError) as e:
            why = f"has no text field {self.field!r}" if isinstance(e, KeyError) else str(e)
        if self.on_error == "skip":
            self.skipped += 1
            return None
        raise ValueError(f"TextDataset: {where} {why}")

    def _line(self, f: int, j: int) -> bytes:
        """Line j of file f, from the file's read-only map (opened on the
        first line read from it, in each process)."""
        m = self._maps.get(f)
        if m is None:
            fd = self._fds.get(f)
            if fd is None:
                fd = self._fds[f] = os.open(self.files[f], os.O_RDONLY | os.O_CLOEXEC)
            m = self._maps[f] = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return m[int(self._starts[f][j]):int(self._ends[f][j])]

    def _texts(self, indices) -> list:
        """The texts of documents `indices` (None for a skipped one): each
        line sliced from its file's map and parsed; a line that does not
        parse as a text goes through _text, which names what is wrong."""
        if self._parquet is not None or not len(indices):
            return [self._text(int(i)) for i in indices]
        self._open()
        indices = np.asarray(indices, np.int64)
        if indices.min() < 0 or indices.max() >= len(self):
            return [self._text(int(i)) for i in indices]  # (the IndexError)
        files = np.searchsorted(self._first, indices, side="right") - 1
        out = []
        for i, f in zip(indices.tolist(), files.tolist()):
            try:
                text = json.loads(self._line(f, i - int(self._first[f])))[self.field]
                if type(text) is str:
                    out.append(text)
                    continue
            except (ValueError, KeyError, TypeError):
                pass
            out.append(self._text(i))
        return out

    def __getitem__(self, index: int):
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list:
        """The documents `indices` tokenized with one encode_batch; a skipped
        one is left out."""
        import torch
        self._open()
        texts = self._texts(indices)
        out = []
        for ids in self._encode([t for t in texts if t is not None]):
            ids = list(ids) if self.eos_id is None else list(ids) + [self.eos_id]
            out.append({"input_ids": torch.tensor(ids, dtype=torch.int64)})
        return out

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tokenizer"], state["_fds"], state["_maps"] = None, None, None  # (each process opens its own)
        state["_memfds"] = {}  # (a process started afresh decompresses again)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._parquet is None:
            self._memfds = {i: _decompressed(p) for i, p in enumerate(self.files) if _zstd(p)}

    def __del__(self):
        for m in (self.__dict__.get("_maps") or {}).values():
            m.close()
        for fd in set((self.__dict__.get("_fds") or {}).values()) | set(self.__dict__.get("_memfds", {}).values()):
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"stoker.text.TextDataset({len(self.files)} files, {len(self)} documents, field={self.field!r})"


def _parquet_texts(paths, field: str):
    """A ParquetDataset of the column `field` when `paths` are Parquet files
    (or a ParquetDataset), else None."""
    from stoker.parquet import ParquetDataset
    if isinstance(paths, ParquetDataset):
        files = paths._args[0]
    else:
        one = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not one or not all(os.fspath(p).endswith((".parquet", ".pq")) for p in one):
            return None
        files = one
    ds = ParquetDataset(files, columns=[field])
    if ds._leaves[0] != "str":
        raise ValueError(f"TextDataset: the Parquet column {field!r} is {ds.fields[0][1]}, not text (a string column)")
    return ds


def _load_tokenizer(tokenizer) -> tuple:
    """("hf", tokenizer.json text) or ("spm", a SentencePiece model's bytes)."""
    if type(tokenizer).__module__.startswith("tokenizers"):
        return "hf", tokenizer.to_str()
    path = os.fspath(tokenizer)
    if not os.path.exists(path):
        raise FileNotFoundError(f"TextDataset: no tokenizer file {path} (a Hugging Face tokenizer.json or a "
                                "SentencePiece .model)")
    if path.endswith(".model"):
        try:
            import sentencepiece  # noqa: F401
        except ImportError:
            raise ImportError(f"TextDataset: {path} is a SentencePiece model: pip install sentencepiece") from None
        with open(path, "rb") as f:
            return "spm", f.read()
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        raise ImportError("stoker.text.TextDataset tokenizes with Hugging Face's tokenizers: pip install "
                          "tokenizers (or stoker[text])") from None
    with open(path) as f:
        return "hf", f.read()


def collate_documents(samples: list) -> dict:
    """A batch of documents of different lengths: {"input_ids": [tensor, ...]}."""
    return {"input_ids": [s["input_ids"] for s in samples]}
