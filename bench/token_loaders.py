"""Token files into training sequences (issue 50, in part): stoker.text.Pack
(concat) over a Megatron .bin/.idx against litData's TokensLoader over the
same tokens in its own chunk format, in the same run.

--docs documents of log-normal lengths (median 400 tokens), uint16.  stoker:
Pack(TokenDataset(...), 2048, "concat"), stoker.DataLoader(batch_size=8,
shuffle=True, num_workers=2): every field made (input_ids, labels,
position_ids, document_ids, cu_seqlens).  litData: the documents written
by litdata.optimize(item_loader=TokensLoader()), read by
StreamingDataset(item_loader=TokensLoader(block_size=2049), shuffle=True)
through StreamingDataLoader(batch_size=8, num_workers=2): raw blocks of
tokens, no labels or positions.  Each in a process of its own, alternating;
tokens/s after the first batch.

    python bench/token_loaders.py [--docs 100000] [--rounds 3]   (litdata from the environment)
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def write(d, docs):
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(400), 1.0, docs), 1, 8192).astype(np.int64)
    tokens = rng.integers(1, 50000, int(lengths.sum()), dtype=np.uint16)
    tokens.tofile(os.path.join(d, "docs.bin"))
    pointers = np.concatenate([[0], np.cumsum(lengths * 2)[:-1]]).astype(np.int64)
    with open(os.path.join(d, "docs.idx"), "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1))
        f.write(lengths.astype(np.int32).tobytes() + pointers.tobytes() +
                np.arange(len(lengths) + 1, dtype=np.int64).tobytes())


def _lit_docs(i, d=None):
    import stoker.text
    ds = stoker.text.TokenDataset(os.path.join(os.environ["TOKEN_DIR"], "docs"), output_dtype="int32")
    for j in range(i, min(i + 1000, len(ds))):
        yield ds[j]["input_ids"].astype(np.uint16)


def write_litdata(d):
    import litdata
    from litdata.streaming.item_loader import TokensLoader
    os.environ["TOKEN_DIR"] = d
    n = int(np.fromfile(os.path.join(d, "docs.idx"), dtype=np.uint64, count=1, offset=18)[0])
    litdata.optimize(fn=_lit_docs, inputs=list(range(0, n, 1000)), output_dir=os.path.join(d, "lit"),
                     chunk_size=2049 * 1024, item_loader=TokensLoader(), num_workers=2, mode="overwrite")


def run(name, d):
    import torch  # noqa: F401  (imports are not the loader's first batch)
    __import__("stoker.text" if name == "stoker" else "litdata")
    t0 = time.perf_counter()
    n = 0
    if name == "stoker":
        import stoker
        from stoker.text import Pack, TokenDataset
        pack = Pack(TokenDataset(os.path.join(d, "docs")), 2048, "concat")
        batches = stoker.DataLoader(pack, batch_size=8, shuffle=True, num_workers=2)
        key = "input_ids"
    else:
        import litdata
        from litdata.streaming.item_loader import TokensLoader
        ds = litdata.StreamingDataset(os.path.join(d, "lit"), item_loader=TokensLoader(block_size=2049), shuffle=True)
        batches = litdata.StreamingDataLoader(ds, batch_size=8, num_workers=2)
        key = None
    for k, b in enumerate(batches):
        x = b[key] if key else b
        n += x.numel() if k else 0
        if k == 0:
            t1 = time.perf_counter()
    t2 = time.perf_counter()
    return {"rate": n / (t2 - t1), "first": t1 - t0}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--one")
    p.add_argument("--dir")
    a = p.parse_args()
    if a.one:
        print(json.dumps(run(a.one, a.dir)))
        return
    with tempfile.TemporaryDirectory() as d:
        write(d, a.docs)
        write_litdata(d)
        res = {"stoker": [], "litdata": []}
        for r in range(a.rounds):
            for name in (["stoker", "litdata"] if r % 2 == 0 else ["litdata", "stoker"]):
                out = subprocess.run([sys.executable, __file__, "--one", name, "--dir", d], capture_output=True,
                                     text=True)
                if out.returncode:
                    print(name, "failed:", out.stderr[-1500:])
                    continue
                res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{a.docs:,} documents (median 400 tokens), sequences of 2,048 (2,049-token blocks for litData), batch 8, "
          f"2 workers, shuffled; median of {a.rounds}")
    print("| loader | tokens/s | first batch |")
    print("|---|---|---|")
    for name, label in (("stoker", "stoker Pack (concat), every field"), ("litdata", "litData TokensLoader, tokens")):
        if res[name]:
            print(f"| {label} | {statistics.median(x['rate'] for x in res[name]) / 1e6:.1f} M | "
                  f"{statistics.median(x['first'] for x in res[name]) * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
