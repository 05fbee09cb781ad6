"""Packing text tokenized on the fly (docs/text.md): stoker.text.Pack over a
TextDataset.

    seqs = stoker.text.Pack(stoker.text.TextDataset("web/*.jsonl", tokenizer="tok.json"), 2048, "best_fit")
    loader = stoker.DataLoader(seqs, batch_size=8, num_workers=2, distributed=True)

A document's length is known only once it is tokenized, so the packing
cannot be planned up front as it is for token files.  Instead each epoch
orders the documents (a keyed permutation of seed and epoch: a new packing
every epoch) and cuts that order into blocks of `block_documents`.  A worker
tokenizes a block (one encode_batch) and packs it in C++ on its own
(text/pack_block.h): a block's sequences depend on the block alone.  The
loader deals blocks to ranks (block r, r + W, ... to rank r of W), reads its
rank's blocks in order through the slot pool, and cuts their sequences into
batches of batch_size.

The state (PackedStreamLoader.state_dict) is positions only: per rank, how
many of its blocks it went through and how many sequences of the next one;
and, per earlier topology of the epoch, the same for each of its ranks.  A
resume with the same world size goes on exactly (bit-identical batches);
on another world size or num_workers the blocks no rank finished are dealt
again, a block begun going on at its next sequence, so every (document,
offset) of the epoch is still delivered exactly once.  To know every rank's
position, state_dict() gathers it over torch.distributed when the job runs
on more than one rank: call it on every rank at the same step, as a
checkpoint does.
"""
from __future__ import annotations

import itertools
from typing import Optional

import numpy as np
import torch

from stoker import _native as N
from stoker.dataloader import DataLoader

__all__ = ["PackedStream", "PackedStreamLoader"]

KIND = "stoker.text.PackedStream"
_POS_BITS = 32


class PackedStream:
    """Sequences packed from a TextDataset as it is tokenized, or from a
    TokenDataset packed again each epoch (made by stoker.text.Pack; read
    through stoker.DataLoader).  `block_documents`: the documents tokenized
    and packed together (a block's last sequence is padded in "concat";
    "best_fit" packs a block's documents longest first); a resume tokenizes
    again at most one block per rank."""

    def __init__(self, dataset, seq_len: int, mode: str, *, window: int, eos_id: Optional[int], pad_id: int,
                 shuffle: bool, seed: int, block_documents: int):
        if not isinstance(block_documents, (int, np.integer)) or isinstance(block_documents, bool) \
                or block_documents < 1:
            raise ValueError(f"Pack: block_documents should be an int >= 1, got {block_documents!r}")
        self.dataset, self.seq_len, self.mode = dataset, int(seq_len), mode
        self.window, self.eos_id, self.pad_id = int(window), eos_id, int(pad_id)
        self.shuffle, self.seed, self.block_documents = bool(shuffle), int(seed), int(block_documents)
        self.documents = len(dataset)
        self.blocks = -(-self.documents // self.block_documents)
        if self.blocks >= 1 << _POS_BITS:
            raise ValueError(f"Pack: {self.blocks} blocks of {block_documents} documents: give a larger "
                             "block_documents")

    @staticmethod
    def stoker_loader():
        """The loader stoker.DataLoader makes for a PackedStream."""
        return PackedStreamLoader

    def fingerprint(self) -> list:
        """What a state must have been saved with to resume here."""
        return [self.documents, self.seq_len, self.mode, self.window, self.eos_id, self.pad_id, self.shuffle,
                self.seed, self.block_documents]

    def block_docs(self, epoch: int, block: int) -> np.ndarray:
        """The documents of `block` in `epoch` (int64 dataset indices)."""
        start = block * self.block_documents
        count = min(self.block_documents, self.documents - start)
        order = (N.lib.feistel_order(self.documents, self.seed & 0xFFFF_FFFF_FFFF_FFFF, int(epoch)) if self.shuffle
                 else N.lib.iota_order(self.documents))
        return np.frombuffer(order.read(start, count), dtype=np.int64)

    def block(self, epoch: int, block: int) -> dict:
        """Block `block` of `epoch` tokenized and packed: the four fields
        [sequences, seq_len], cu_seqlens end to end and cu_first, and counts."""
        docs = self.block_docs(epoch, block)
        tokens, starts, kept = self._tokens(docs)
        # best_fit takes a block's documents longest first (best fit decreasing),
        # and shuffles the block's sequences when the documents are shuffled.
        best = self.mode == "best_fit"
        key = ((self.seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + block * 0x94D049BB133111EB)
               & 0xFFFF_FFFF_FFFF_FFFF) | 1 if best and self.shuffle else 0
        out = N.lib.pack_block(tokens, starts, kept, self.seq_len, self.mode, self.window, self.pad_id,
                               longest_first=best, shuffle_key=key)
        out["block"] = np.int64(block)
        out["skipped"] = np.int64(len(docs) - len(kept))
        return out

    def _tokens(self, docs: np.ndarray) -> tuple:
        """The documents `docs` tokenized end to end: (tokens, starts, the
        documents kept); eos_id after each."""
        ds = self.dataset
        if not hasattr(ds, "_encode"):  # a TokenDataset: read natively
            tokens, starts = N.lib.NativeDataset.token_block(ds._native, docs,
                                                             -1 if self.eos_id is None else int(self.eos_id))
            return tokens, starts, docs
        texts = ds._texts(docs)
        kept = [i for i, t in enumerate(texts) if t is not None]
        ids = ds._encode([texts[i] for i in kept])
        extra = [e for e in (ds.eos_id, self.eos_id) if e is not None]
        lengths = np.fromiter((len(x) + len(extra) for x in ids), np.uint64, len(ids))
        starts = np.zeros(len(ids) + 1, np.uint64)
        np.cumsum(lengths, out=starts[1:])
        flat = itertools.chain.from_iterable(itertools.chain.from_iterable((x, extra) for x in ids)) if extra \
            else itertools.chain.from_iterable(ids)
        return np.fromiter(flat, np.int64, int(starts[-1])), starts, docs[kept]

    def __len__(self):
        raise TypeError("a Pack of a TextDataset (or with repack=True) has no length before its blocks are packed: "
                        "iterate it through stoker.DataLoader")

    def __repr__(self) -> str:
        return (f"stoker.text.Pack({type(self.dataset).__name__}, seq_len={self.seq_len}, mode={self.mode!r}, "
                f"{self.blocks} blocks of {self.block_documents} documents)")


class _Blocks(torch.utils.data.Dataset):
    """What the block loader's workers read: key (epoch << 32 | block) ->
    the block tokenized and packed."""

    def __init__(self, stream: PackedStream):
        self.stream = stream

    def __len__(self):
        return self.stream.blocks

    def __getitem__(self, key: int) -> dict:
        key = int(key)
        return self.stream.block(key >> _POS_BITS, key & ((1 << _POS_BITS) - 1))


class _Keys(torch.utils.data.Sampler):
    """The block loader's sampler: the keys the pass on hand reads."""

    def __init__(self):
        self.keys: list = []

    def __iter__(self):
        return iter(list(self.keys))

    def __len__(self):
        return len(self.keys)


def _deal(items: np.ndarray, world: int, ranks: list) -> np.ndarray:
    """The blocks (rows of (block, first sequence)) that no rank of a
    segment dealt `items` over `world` ranks has finished, from each rank's
    position ranks[r] = (blocks finished, sequences of the next one): first
    each begun block at its next sequence (by rank), then the untouched
    blocks in block order."""
    begun, rest = [], []
    for r in range(world):
        share = items[r::world]
        done, at = ranks[r]
        if done >= len(share):
            continue
        if at > share[done, 1]:
            begun.append([share[done, 0], at])
            done += 1
        rest.append(share[done:])
    rest = np.concatenate(rest) if rest else np.zeros((0, 2), np.int64)
    rest = rest[np.argsort(rest[:, 0], kind="stable")]
    return np.concatenate([np.array(begun, np.int64).reshape(-1, 2), rest]).astype(np.int64)


class PackedStreamLoader(DataLoader):
    """stoker.DataLoader over a Pack of a TextDataset (stoker.DataLoader
    makes one): batches of batch_size packed sequences, {"input_ids",
    "labels", "position_ids", "document_ids"} [batch, seq_len] and
    "cu_seqlens" (a list, each sequence's).  num_workers processes tokenize
    and pack blocks; shuffle is the Pack's (its documents' order, new each
    epoch); distributed=True deals the blocks to the ranks.  A rank's epoch
    ends when its blocks do, so ranks may take different numbers of steps:
    train a number of steps, or take the epoch's end on any rank as the end
    (docs/text.md)."""

    def __init__(self, dataset: PackedStream, batch_size: Optional[int] = 1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, distributed: bool = False, seed: int = 0, even_split: str = "pad",
                 output: str = "torch", sample_seeds: bool = False, max_worker_restarts: int = 0, **kwargs):
        for name, v in (("sampler", sampler), ("batch_sampler", batch_sampler), ("collate_fn", collate_fn),
                        ("generator", generator), ("sample_seeds", sample_seeds or None)):
            if v is not None:
                raise ValueError(f"stoker.DataLoader: a PackedStream takes no {name} (the Pack orders, "
                                 "packs and batches its sequences; its shuffle= and seed= set the order)")
        if shuffle is not None and bool(shuffle) != dataset.shuffle:
            raise ValueError(f"stoker.DataLoader: shuffle={shuffle!r}, but the Pack's documents are "
                             f"{'shuffled' if dataset.shuffle else 'in order'}: give shuffle= to the Pack")
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"stoker.DataLoader: batch_size should be an int >= 1 for packed sequences, "
                             f"got {batch_size!r}")
        if kwargs.get("in_order", True) is not True:
            raise ValueError("stoker.DataLoader: a PackedStream is read in order (in_order=True): its state is the "
                             "blocks each rank went through in order")
        if output != "torch":
            raise ValueError("stoker.DataLoader: a PackedStream yields torch tensors (output='torch')")
        from stoker.distributed import rank_and_world_size
        self.rank, self.world_size = rank_and_world_size() if distributed else (0, 1)
        self.dataset, self.batch_size, self.drop_last = dataset, int(batch_size), bool(drop_last)
        self.num_workers, self.pin_memory = num_workers, bool(pin_memory)
        self._keys = _Keys()
        self._blocks = DataLoader(_Blocks(dataset), batch_size=None, sampler=self._keys, num_workers=num_workers,
                                  timeout=timeout, worker_init_fn=worker_init_fn,
                                  multiprocessing_context=multiprocessing_context,
                                  max_worker_restarts=max_worker_restarts, **kwargs)
        self._epoch = 0  # the epoch of the pass on hand (or of the last)
        self._segments: list = []  # the epoch's earlier topologies: {"world", "ranks"}
        self._loaded: Optional[list] = None  # where the next pass starts: (blocks finished, next sequence)
        self._pos: Optional[list] = None  # this rank's (blocks finished, next sequence) in the pass on hand
        self._finished = False  # the last pass ran to its end
        self._skipped = 0
        self._sequences = 0
        self._tokens = 0

    # ----- the order -----------------------------------------------------------------
    def _items(self) -> np.ndarray:
        """The epoch's blocks as the current segment deals them: rows of
        (block, first sequence)."""
        items = np.stack([np.arange(self.dataset.blocks, dtype=np.int64),
                          np.zeros(self.dataset.blocks, np.int64)], axis=1)
        for seg in self._segments:
            items = _deal(items, seg["world"], seg["ranks"])
        return items

    def set_epoch(self, epoch: int):
        self._epoch = int(epoch)
        self._segments, self._loaded, self._pos, self._finished = [], None, None, False

    def __len__(self):
        raise TypeError("a loader of a PackedStream has no length: its sequences are known as its blocks are "
                        "packed")

    # ----- a pass ----------------------------------------------------------------------
    def __iter__(self):
        if self._finished:  # (a new epoch: a new order of documents, packed anew)
            self.set_epoch(self._epoch + 1)
        epoch = self._epoch
        share = self._items()[self.rank::self.world_size]
        done, at = self._loaded or (0, None)
        self._loaded = None
        starts = [int(s) for s in share[done:, 1]]
        if at is not None and done < len(share):
            starts[0] = max(starts[0], int(at))
        self._keys.keys = [(epoch << _POS_BITS) | int(b) for b in share[done:, 0]]

        def position(pending: list, k: int) -> list:
            """(blocks of the share finished, the next one's next sequence)
            once pending is what is left of the blocks up to k received."""
            if pending:
                return [done + pending[0][3], pending[0][1]]
            return [done + k + 1, starts[k + 1] if k + 1 < len(starts) else 0]

        self._pos = position([], -1)
        pending: list = []  # [block tensors, next sequence, end, block's place in starts]
        held, k = 0, -1
        blocks = iter(self._blocks)
        try:
            for k, out in enumerate(blocks):
                self._skipped += int(out["skipped"])
                n = out["input_ids"].shape[0]
                if starts[k] < n:
                    pending.append([out, starts[k], n, k])
                    held += n - starts[k]
                self._pos = position(pending, k)
                while held >= self.batch_size:
                    batch, held = self._cut(pending, held)
                    self._pos = position(pending, k)
                    yield batch
            if held and not self.drop_last:
                batch, held = self._cut(pending, held)
                self._pos = position(pending, k)
                yield batch
        finally:
            del blocks
        self._pos, self._finished = [len(share), 0], True

    def _cut(self, pending: list, held: int):
        """The next batch, taken off the front of `pending`."""
        want, parts = min(self.batch_size, held), []
        while want:
            out, first, end, _ = pending[0]
            take = min(want, end - first)
            parts.append((out, first, first + take))
            want -= take
            held -= take
            if first + take == end:
                pending.pop(0)
            else:
                pending[0][1] = first + take
        batch = {}
        for f in ("input_ids", "labels", "position_ids", "document_ids"):
            pieces = [out[f][a:b] for out, a, b in parts]
            batch[f] = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
        batch["cu_seqlens"] = [out["cu_seqlens"][int(out["cu_first"][i]):int(out["cu_first"][i + 1])]
                               for out, a, b in parts for i in range(a, b)]
        self._sequences += batch["input_ids"].shape[0]
        self._tokens += int((batch["document_ids"] >= 0).sum())
        if self.pin_memory and torch.cuda.is_available():
            batch = {f: ([t.pin_memory() for t in v] if isinstance(v, list) else v.pin_memory())
                     for f, v in batch.items()}
        return batch, held

    # ----- resume ----------------------------------------------------------------------
    def _mine(self) -> list:
        """This rank's (epoch, blocks finished, next sequence)."""
        if self._finished:
            return [self._epoch + 1, 0, 0]
        if self._loaded is not None:
            return [self._epoch, int(self._loaded[0]), int(self._loaded[1] or 0)]
        return [self._epoch] + ([int(v) for v in self._pos] if self._pos else [0, 0])

    def state_dict(self) -> dict:
        """Positions only: this rank's, and every rank's when the job runs
        on torch.distributed (gathered: call it on every rank at the same
        step)."""
        mine = self._mine()
        ranks = {self.rank: mine}
        import torch.distributed as dist
        if self.world_size > 1 and dist.is_available() and dist.is_initialized() \
                and dist.get_world_size() == self.world_size:
            every = [None] * self.world_size
            dist.all_gather_object(every, [self.rank, mine])
            ranks = {int(r): m for r, m in every}
        # (the segments are of self._epoch, also once this rank is through it
        # and its position says the next epoch: other ranks may be in it)
        return {"kind": KIND, "fingerprint": self.dataset.fingerprint(), "world": self.world_size,
                "segments_epoch": self._epoch, "segments": [dict(seg) for seg in self._segments], "ranks": ranks}

    def load_state_dict(self, state):
        """A state from state_dict(): the gathered one of any rank, or a list
        of every rank's own.  The same world size resumes each rank where it
        was (the uninterrupted run's batches); another deals the blocks no
        rank finished to the new ranks."""
        state = _merge(state if isinstance(state, (list, tuple)) else [state])
        want = self.dataset.fingerprint()
        names = ["documents", "seq_len", "mode", "window", "eos_id", "pad_id", "shuffle", "seed", "block_documents"]
        for name, old, new in zip(names, state["fingerprint"], want):
            if old != new:
                raise ValueError(f"load_state_dict: the state was saved by a Pack with {name}={old!r}, this one has "
                                 f"{name}={new!r}: the blocks would be other blocks (build the Pack as it was)")
        world, ranks = int(state["world"]), state["ranks"]
        if world == self.world_size:
            if self.rank not in ranks:
                raise ValueError(f"load_state_dict: the state holds the position of rank(s) {sorted(ranks)} only, "
                                 f"not of rank {self.rank}: save it with torch.distributed initialized (state_dict() "
                                 "gathers every rank's), or load each rank's own")
            epoch, done, at = ranks[self.rank]
            self.set_epoch(epoch)
            self._segments = _segments(state, epoch)
            self._loaded = (done, at)
            return
        missing = sorted(set(range(world)) - set(ranks))
        if missing:
            raise ValueError(f"load_state_dict: resuming a PackedStream on {self.world_size} ranks from "
                             f"{world} needs every old rank's position, and rank(s) {missing[:8]} are missing: save "
                             "the state with torch.distributed initialized (state_dict() gathers them), or pass the "
                             "list of every rank's state")
        epoch = min(m[0] for m in ranks.values())
        self.set_epoch(epoch)
        self._segments = _segments(state, epoch)
        shares = self._items()
        positions = []
        for r in range(world):
            e, done, at = ranks[r]
            if e == epoch + 1 and done == 0 and at == 0:  # (through the epoch, not yet into the next)
                done, at = len(shares[r::world]), 0
            elif e != epoch:
                raise ValueError(f"load_state_dict: rank {r} of the saved job was in epoch {e} and others in "
                                 f"{epoch}: a resume on another world size needs them in one epoch (resume on "
                                 f"{world} ranks, or from a state saved before an epoch's end)")
            positions.append([int(done), int(at)])
        self._segments.append({"world": world, "ranks": positions})

    def stats(self, memory: bool = True) -> dict:
        out = self._blocks.stats(memory)
        out["pack"] = {"epoch": self._epoch, "sequences": self._sequences, "tokens": self._tokens,
                       "padding_fraction": 1.0 - self._tokens / max(1, self._sequences * self.dataset.seq_len),
                       "skipped": self._skipped, "segments": len(self._segments)}
        return out


def _merge(states: list) -> dict:
    """One state from a rank's gathered state or from every rank's own."""
    if not states:
        raise ValueError("load_state_dict: no state")
    for s in states:
        if not isinstance(s, dict) or s.get("kind") != KIND:
            raise ValueError(f"load_state_dict: not the state of a loader of a PackedStream (a Pack of a TextDataset "
                             f"or with repack=True) "
                             f"(kind {s.get('kind') if isinstance(s, dict) else type(s).__name__!r})")
    out = dict(states[0])
    out["ranks"], out["segments"] = {}, {}
    for s in states:
        if s["world"] != out["world"] or s["fingerprint"] != out["fingerprint"]:
            raise ValueError("load_state_dict: the states were saved by different jobs (world size or Pack)")
        out["ranks"].update({int(r): list(m) for r, m in s["ranks"].items()})
        out["segments"].setdefault(int(s["segments_epoch"]), s["segments"])
    return out


def _segments(state: dict, epoch: int) -> list:
    """The earlier topologies of `epoch` a merged state holds (none: it
    began on this one)."""
    return [dict(seg) for seg in state["segments"].get(epoch, [])]
