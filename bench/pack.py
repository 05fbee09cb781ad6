"""Packing documents into sequences (issue 50, in part): stoker.text.Pack
against Grain's BestFitPackIterDataset on the same documents and window, in
the same run.

Documents: --docs lengths drawn log-normally (median 400 tokens, at most
seq_len: Grain's packer takes no longer ones), uint16 tokens in one
Megatron .bin/.idx.  Per round:
  - stoker, best_fit: Pack(TokenDataset(...), seq_len, "best_fit",
    window) made (the plan) and read to its end through stoker.DataLoader
    (batch 8, one C++ reader thread: the packer alone, every field made:
    input_ids, labels, position_ids, document_ids, cu_seqlens);
  - stoker, concat: the same with mode="concat";
  - Grain: the same documents as {"inputs": array} from memory through
    BestFitPackIterDataset(length_struct=seq_len, num_packing_bins=window,
    shuffle_bins=False), read to its end in this process (one thread).
Reports packed tokens/s (the documents' tokens over the time to pack them),
the padding fraction (padding places over all places) and, for stoker, the
bytes/s of its output and of the files against one core's memcpy.

    python bench/pack.py [--docs 200000] [--seq-len 2048] [--window 1024] [--rounds 3]
    (Grain from the environment: pip install grain)
"""
import argparse
import os
import statistics
import struct
import tempfile
import time

import numpy as np

import stoker
from stoker.text import Pack, TokenDataset
from token_files import memcpy_rate  # (bench/ is the script's directory)


def write(path, lengths, rng):
    tokens = rng.integers(1, 50000, int(lengths.sum()), dtype=np.uint16)
    tokens.tofile(path + ".bin")
    pointers = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * 2)[:-1]]).astype(np.int64)
    with open(path + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1))
        f.write(lengths.astype(np.int32).tobytes() + pointers.tobytes() +
                np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    return tokens


def run_stoker(prefix, seq_len, mode, window):
    t = time.perf_counter()
    pack = Pack(TokenDataset(prefix), seq_len, mode, window=window, shuffle=False)
    plan = time.perf_counter() - t
    n = 0
    for b in stoker.DataLoader(pack, batch_size=8, num_workers=1):
        n += b["input_ids"].numel()
    seconds = time.perf_counter() - t
    return pack.tokens / seconds, pack.padding_fraction, plan, n * (8 * 4) / seconds


def run_grain(tokens, lengths, seq_len, window):
    import grain
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    docs = [{"inputs": tokens[s:s + n].astype(np.int32)} for s, n in zip(starts, lengths)]
    t = time.perf_counter()
    ds = grain.MapDataset.source(docs).to_iter_dataset()
    packed = grain.experimental.BestFitPackIterDataset(ds, length_struct={"inputs": seq_len},
                                                       num_packing_bins=window, shuffle_bins=False)
    places = used = 0
    for ex in packed:
        seg = ex["inputs_segment_ids"]
        places += seg.size
        used += int(np.count_nonzero(seg))
    seconds = time.perf_counter() - t
    return used / seconds, 1 - used / places


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--window", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(400), 1.0, a.docs), 1, a.seq_len).astype(np.int64)
    try:
        import grain  # noqa: F401
        have_grain = True
    except ImportError:
        have_grain = False
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "docs")
        tokens = write(prefix, lengths, rng)
        res = {"best_fit": [], "concat": [], "grain": []}
        for _ in range(a.rounds):
            res["best_fit"].append(run_stoker(prefix, a.seq_len, "best_fit", a.window))
            res["concat"].append(run_stoker(prefix, a.seq_len, "concat", a.window))
            if have_grain:
                res["grain"].append(run_grain(tokens, lengths, a.seq_len, a.window))
        copy = memcpy_rate(int(lengths.sum()) * 32)
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    print(f"{a.docs:,} documents, {int(lengths.sum()):,} tokens (median {int(np.median(lengths))}), seq_len "
          f"{a.seq_len}, window {a.window}; median of {a.rounds}")
    print("| packer | packed tokens/s | padding | stoker's output | vs Grain |")
    print("|---|---|---|---|---|")
    ref = med(res["grain"], 0) if res["grain"] else None
    for name in ("best_fit", "concat"):
        rate = med(res[name], 0)
        print(f"| stoker {name} (plan {med(res[name], 2) * 1e3:.0f} ms) | {rate / 1e6:.1f} M | "
              f"{med(res[name], 1):.2%} | {med(res[name], 3) / 1e9:.2f} GB/s ({med(res[name], 3) / copy:.2f}x one "
              f"core's memcpy; the files' bytes {rate * 2 / copy:.3f}x) | "
              f"{rate / ref if ref else float('nan'):.1f}x |")
    if ref:
        print(f"| Grain BestFitPackIterDataset | {ref / 1e6:.2f} M | {med(res['grain'], 1):.2%} | | 1.0x |")


if __name__ == "__main__":
    main()
