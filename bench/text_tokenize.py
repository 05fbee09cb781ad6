"""Tokenizing on the fly (issue 50, in part): stoker.text.TextDataset through
stoker.DataLoader against Hugging Face tokenizers' encode_batch alone over
the same texts already in memory, and against torch's DataLoader whose
dataset encodes each document in __getitem__, in the same run.

A JSON Lines corpus of --docs documents (words drawn from a Zipf vocabulary,
about 1 KB each) and a byte-level BPE tokenizer of 8,000 ids trained on part
of it, here.  Per round, each once, alternating: encode_batch over all the
texts in batches of 64 (its own threads: as many as the machine's cores);
stoker: TextDataset, batch 64, num_workers=2 (each batch one encode_batch in
a worker); torch: DataLoader(batch 64, num_workers=2) over a Dataset of the
lines whose __getitem__ parses and encodes one document.  tokens/s.

    python bench/text_tokenize.py [--docs 20000] [--rounds 3]
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


class LazyTokenizer:
    """A tokenizer.json loaded at first use, in the process that uses it
    (a worker: the object is pickled or forked without it)."""

    def __init__(self, path):
        self.path, self._tok = path, None

    @property
    def tok(self):
        if self._tok is None:
            from tokenizers import Tokenizer
            self._tok = Tokenizer.from_file(self.path)
        return self._tok


class PerDocument(LazyTokenizer, torch.utils.data.Dataset):
    def __init__(self, lines, tokenizer_path):
        super().__init__(tokenizer_path)
        self.lines = lines

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return torch.tensor(self.tok.encode(json.loads(self.lines[i])["text"]).ids)


def corpus(d, docs, words=lambda rng: 170):
    """`docs` JSON Lines documents of `words(rng)` words from a Zipf
    vocabulary, written to d/corpus.jsonl, and a byte-level BPE of 8,000 ids
    trained on the first 2,000: (texts, lines, tokenizer, its path, the
    .jsonl's path)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    rng = np.random.default_rng(0)
    vocab = ["".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(2, 10))) for _ in range(20000)]
    z = 1 / np.arange(1, len(vocab) + 1) ** 1.1
    z /= z.sum()
    texts = [" ".join(vocab[i] for i in rng.choice(len(vocab), words(rng), p=z)) + "." for _ in range(docs)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(texts[:2000], trainers.BpeTrainer(vocab_size=8000, special_tokens=["[UNK]"]))
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    lines = [json.dumps({"text": t}) for t in texts]
    jsonl = os.path.join(d, "corpus.jsonl")
    with open(jsonl, "w") as f:
        f.write("\n".join(lines) + "\n")
    return texts, lines, tok, path, jsonl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        texts, lines, tok, path, _ = corpus(d, a.docs)
        ds = stoker.text.TextDataset(os.path.join(d, "corpus.jsonl"), tokenizer=path)
        res = {"encode_batch": [], "stoker": [], "torch": []}
        for r in range(a.rounds):
            runs = ["encode_batch", "stoker", "torch"]
            for name in (runs if r % 2 == 0 else runs[::-1]):
                t = time.perf_counter()
                if name == "encode_batch":
                    n = sum(len(e.ids) for k in range(0, len(texts), 64) for e in tok.encode_batch(texts[k:k + 64]))
                elif name == "stoker":
                    loader = stoker.DataLoader(ds, batch_size=64, num_workers=2,
                                               collate_fn=stoker.text.collate_documents)
                    n = sum(len(x) for b in loader for x in b["input_ids"])
                else:
                    loader = torch.utils.data.DataLoader(PerDocument(lines, path), batch_size=64, num_workers=2,
                                                         collate_fn=list)
                    n = sum(len(x) for b in loader for x in b)
                res[name].append(n / (time.perf_counter() - t))
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"{a.docs:,} documents of about 1 KB, BPE of 8,000 ids, {os.cpu_count()} cores; median of {a.rounds}")
    print("| | tokens/s | vs encode_batch alone |")
    print("|---|---|---|")
    for name, label in (("encode_batch", "encode_batch alone, texts in memory"),
                        ("stoker", "stoker: TextDataset, num_workers=2"),
                        ("torch", "torch DataLoader, encode per document, num_workers=2")):
        print(f"| {label} | {med[name] / 1e6:.2f} M | {med[name] / med['encode_batch']:.2f}x |")


if __name__ == "__main__":
    main()
