"""Tokenize and pack from JSON Lines (issue 50): stoker.text.Pack over a
TextDataset against Hugging Face tokenizers' encode_batch alone (the
ceiling: the texts already in memory, no packing), against torch's
DataLoader with an HF tokenizer and a Python packing collate, and against
Grain (an HF tokenizer map, its BestFitPackIterDataset, mp_prefetch), in
the same run.

The corpus of bench/text_tokenize.py: --docs JSON Lines documents of words
from a Zipf vocabulary (20 to 320 words, about 210 tokens each), a byte-level BPE
of 8,000 ids trained here on part of them.  seq_len 2,048; batches of 8
sequences; 2 worker processes each (Grain: mp_prefetch with 2 workers).

- encode_batch: over all the texts in batches of 64, its own threads; and
  encode_batch_fast, the same ids without character offsets (what
  TextDataset calls where tokenizers has it).
- stoker best_fit / concat: Pack(TextDataset(jsonl), 2048, mode,
  window=1024), stoker.DataLoader(batch_size=8, num_workers=2): every field
  (input_ids, labels, position_ids, document_ids, cu_seqlens).
- torch: DataLoader(batch_size=64 documents, num_workers=2) over the lines;
  its collate_fn parses them, encode_batch's them and packs them in Python
  (concatenated, cut every 2,048; labels, positions, document ids made per
  document); the sequences are batched by 8 in the loop.
- Grain: MapDataset.source(lines).map(parse + encode) ->
  BestFitPackIterDataset(length_struct=2048, num_packing_bins=1024) ->
  batch(8) -> mp_prefetch(2 workers).

Tokens/s counts the documents' tokens delivered (padding left out), from the
loader's construction to its last batch; each way once per round, the order
alternating; the median of --rounds.

    PYTHONPATH=python /tmp/peers/bin/python bench/text_pack.py [--docs 20000] [--rounds 3] [--resume]
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import torch

import stoker
import stoker.text
from text_tokenize import LazyTokenizer, corpus  # (bench/ is the script's directory)

SEQ_LEN, BATCH = 2048, 8


class Lines(torch.utils.data.Dataset):
    def __init__(self, lines):
        self.lines = lines

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return self.lines[i]


class PackingCollate(LazyTokenizer):
    """Parse, encode_batch and pack a batch of documents in Python."""

    def __call__(self, lines):
        ids, labels, pos, docs = [], [], [], []
        for d, e in enumerate(self.tok.encode_batch([json.loads(x)["text"] for x in lines])):
            t = e.ids
            ids += t
            labels += t[1:] + [-100]
            pos += list(range(len(t)))
            docs += [d] * len(t)
        n = -(-len(ids) // SEQ_LEN) * SEQ_LEN
        pad = n - len(ids)
        out = {"input_ids": ids + [0] * pad, "labels": labels + [-100] * pad, "position_ids": pos + [0] * pad,
               "document_ids": docs + [-1] * pad}
        return {k: torch.tensor(v).view(-1, SEQ_LEN) for k, v in out.items()}


class GrainEncode(LazyTokenizer):
    def __call__(self, line):
        return {"inputs": np.asarray(self.tok.encode(json.loads(line)["text"]).ids, np.int32)}


def run(name, texts, lines, tok, tok_path, jsonl):
    t = time.perf_counter()
    padding = None
    if name.startswith("encode_batch"):
        encode = getattr(tok, name)
        n = sum(len(e.ids) for k in range(0, len(texts), 64) for e in encode(texts[k:k + 64]))
    elif name.startswith("stoker"):
        mode = name.split()[1]
        seqs = stoker.text.Pack(stoker.text.TextDataset(jsonl, tokenizer=tok_path), SEQ_LEN, mode, window=1024)
        loader = stoker.DataLoader(seqs, batch_size=BATCH, num_workers=2)
        n = places = 0
        for b in loader:
            n += int((b["document_ids"] >= 0).sum())
            places += b["document_ids"].numel()
        padding = 1 - n / places
    elif name == "torch":
        loader = torch.utils.data.DataLoader(Lines(lines), batch_size=64, num_workers=2,
                                             collate_fn=PackingCollate(tok_path))
        n = places = 0
        for b in loader:
            for k in range(0, len(b["input_ids"]), BATCH):  # (batches of 8 sequences)
                d = b["document_ids"][k:k + BATCH]
                n += int((d >= 0).sum())
                places += d.numel()
        padding = 1 - n / places
    else:
        import grain
        ds = grain.MapDataset.source(lines).map(GrainEncode(tok_path)).to_iter_dataset()
        packed = grain.experimental.BestFitPackIterDataset(ds, length_struct={"inputs": SEQ_LEN},
                                                           num_packing_bins=1024, shuffle_bins=False)
        it = packed.batch(BATCH).mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
        n = places = 0
        for b in it:
            seg = b["inputs_segment_ids"]
            n += int(np.count_nonzero(seg))
            places += seg.size
        padding = 1 - n / places
    return n / (time.perf_counter() - t), padding, n


def resume(jsonl, tok_path, world=8):
    """Rank 0 of `world` (positions gathered from every rank's own state),
    stopped mid-epoch and resumed on world - 1 ranks: the state's size and
    load_state_dict to the first batch (the begun blocks tokenized again)."""
    import pickle
    seqs = stoker.text.Pack(stoker.text.TextDataset(jsonl, tokenizer=tok_path), SEQ_LEN, "best_fit", window=1024)
    states = []
    for rank in range(world):
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
        loader = stoker.DataLoader(seqs, batch_size=BATCH, num_workers=0, distributed=True)
        it = iter(loader)
        for _ in range(3):
            next(it)
        states.append(loader.state_dict())
        del it
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", str(world - 1)
    t = time.perf_counter()
    again = stoker.DataLoader(seqs, batch_size=BATCH, num_workers=2, distributed=True)
    again.load_state_dict(states)
    next(iter(again))
    took = time.perf_counter() - t
    merged = dict(states[0], ranks={r: s["ranks"][r] for r, s in enumerate(states)})
    print(f"resume on {world - 1} ranks from {world}: state {len(pickle.dumps(merged))} bytes (every rank's "
          f"position), load_state_dict to the first batch {took:.2f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-grain", action="store_true")
    p.add_argument("--resume", action="store_true", help="measure the resume instead")
    a = p.parse_args()
    names = ["encode_batch", "encode_batch_fast", "stoker best_fit", "stoker concat", "torch"]
    if not a.no_grain:
        try:
            import grain  # noqa: F401
            names.append("grain")
        except ImportError:
            pass
    with tempfile.TemporaryDirectory() as d:
        texts, lines, tok, tok_path, jsonl = corpus(d, a.docs, words=lambda rng: rng.integers(20, 320))
        if a.resume:
            return resume(jsonl, tok_path)
        res = {k: [] for k in names}
        pad = {}
        for r in range(a.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                rate, padding, tokens = run(name, texts, lines, tok, tok_path, jsonl)
                if name == "encode_batch":
                    per_doc = tokens / len(texts)
                res[name].append(rate)
                pad[name] = padding
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"{a.docs:,} JSON Lines documents ({per_doc:.0f} tokens each on average), BPE of 8,000 ids, seq_len {SEQ_LEN}, batches "
          f"of {BATCH}, {os.cpu_count()} cores; median of {a.rounds}")
    print("| | tokens/s | vs encode_batch alone | padding |")
    print("|---|---|---|---|")
    labels = {"encode_batch": "encode_batch alone, texts in memory, no packing",
              "encode_batch_fast": "encode_batch_fast alone (the same ids, no offsets), texts in memory",
              "stoker best_fit": "stoker: Pack(TextDataset, best_fit), num_workers=2",
              "stoker concat": "stoker: Pack(TextDataset, concat), num_workers=2",
              "torch": "torch DataLoader, encode_batch + Python packing collate, num_workers=2",
              "grain": "Grain: tokenizer map + BestFitPackIterDataset + mp_prefetch(2)"}
    for name in names:
        p_ = "" if pad.get(name) is None else f"{pad[name]:.2%}"
        print(f"| {labels[name]} | {med[name] / 1e6:.2f} M | {med[name] / med['encode_batch']:.2f}x | {p_} |")


if __name__ == "__main__":
    main()
