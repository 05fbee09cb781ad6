"""stoker.text.Pack over a TextDataset (issue 50): text tokenized as it is
read, packed block by block in C++, batched by the loader; equal to a
reference packer over encode_batch's ids, every token once, a new packing
each epoch, resumed bit-identical at any step and, on 4 -> 3 -> 6 -> 1
ranks with other workers and batch sizes, every (document, token) of the
epoch exactly once."""
import collections
import json
import os

import numpy as np
import pytest
import torch

import stoker
import stoker.text
from test_text import CORPUS, reference_fields, reference_pack, train_tokenizer

pytest.importorskip("tokenizers")

EOS = 1
FIELDS = ("input_ids", "labels", "position_ids", "document_ids")


def write_corpus(d, n=300, seed=0):
    """JSON Lines of words (Unicode, empty texts, a few long documents) and
    a tokenizer trained here; (path, tokenizer, texts)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "délta", "日本語", "🚀", "x", "the", "fox"]
    texts = [" ".join(rng.choice(words, rng.integers(0, 80))) for _ in range(n)]
    texts[7] = "long " * 400  # longer than any seq_len here
    texts[11] = ""
    path = os.path.join(d, "web.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    tok = train_tokenizer(texts[:60] + CORPUS, os.path.join(d, "tok.json"))
    return path, tok, texts


def pairs(batch) -> collections.Counter:
    """(document, token) of every token a batch holds (padding left out)."""
    d = batch["document_ids"].reshape(-1)
    keep = d >= 0
    return collections.Counter(zip(d[keep].tolist(), batch["input_ids"].reshape(-1)[keep].tolist()))


@pytest.mark.parametrize("mode,shuffle", [("concat", True), ("best_fit", False), ("best_fit", True)])
def test_text_packs_as_a_reference_packer_over_encode_batch_and_every_token_once(tmp_path, mode, shuffle):
    path, tok, texts = write_corpus(str(tmp_path))
    ids = [e.ids + [EOS] for e in tok.encode_batch(texts)]
    seqs = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tok), 48, mode, window=8, eos_id=EOS, pad_id=3,
                            block_documents=40, shuffle=shuffle)
    assert isinstance(seqs, stoker.text.PackedStream) and seqs.blocks == 8
    loader = stoker.DataLoader(seqs, batch_size=5, num_workers=2)
    got = list(loader)
    assert all(b["input_ids"].shape == (5, 48) for b in got[:-1])
    rows = [(b["input_ids"][i].tolist(), b["labels"][i].tolist(), b["position_ids"][i].tolist(),
             b["document_ids"][i].tolist(), b["cu_seqlens"][i].tolist()) for b in got for i in range(len(b["input_ids"]))]
    # The reference: each block of the epoch's order packed on its own; best_fit
    # takes a block's documents longest first, and its sequences come shuffled
    # when the documents are.
    at = 0
    for b in range(seqs.blocks):
        docs = [int(d) for d in seqs.block_docs(0, b)]
        if mode == "best_fit":
            docs = sorted(docs, key=lambda d: -len(ids[d]))
        want = [reference_fields(ids, pieces, 48, pad_id=3)
                for pieces in reference_pack({d: len(ids[d]) for d in docs}, docs, 48, mode, window=8)]
        mine = rows[at:at + len(want)]
        at += len(want)
        if mode == "best_fit" and shuffle:
            assert mine != [tuple(w) for w in want]
            mine, want = sorted(mine), sorted(tuple(w) for w in want)
        assert [list(r) for r in mine] == [list(w) for w in want], b
    assert at == len(rows)
    everything = collections.Counter((d, t) for d, x in enumerate(ids) for t in x)
    assert sum((pairs(b) for b in got), collections.Counter()) == everything
    stats = loader.stats()["pack"]
    assert stats["tokens"] == sum(map(len, ids)) and stats["sequences"] == len(rows)
    # The next epoch is packed anew, in another order of documents (when
    # shuffled), every token once again.
    second = list(loader)
    assert sum((pairs(b) for b in second), collections.Counter()) == everything
    assert torch.equal(second[0]["input_ids"], got[0]["input_ids"]) != shuffle
    assert loader.stats()["pack"]["epoch"] == 1
    if mode == "best_fit":  # documents whole: cut only into whole sequences and a rest
        starts = collections.Counter()
        for b in got:
            first = b["position_ids"] == 0
            starts.update(b["document_ids"][first & (b["document_ids"] >= 0)].tolist())
        assert all(n == -(-len(ids[d]) // 48) for d, n in starts.items())


def test_a_packed_text_stream_resumes_bit_identical_at_random_steps(tmp_path):
    path, _, _ = write_corpus(str(tmp_path), seed=1)
    seqs = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tmp_path / "tok.json"), 40, "best_fit",
                            window=4, eos_id=EOS, seed=5, block_documents=30)

    def loader(workers=2):
        return stoker.DataLoader(seqs, batch_size=4, num_workers=workers)
    def two_epochs(run):
        for _ in range(2):
            yield from run
    whole = list(two_epochs(loader()))
    per_epoch = len(list(loader()))
    rng = np.random.default_rng(2)
    for stop in sorted(rng.choice(len(whole) - 1, 4, replace=False) + 1):
        run = loader()
        it = two_epochs(run)
        for _ in range(stop):
            next(it)
        state = run.state_dict()
        del it
        assert len(json.dumps(state)) < 64 * 1024  # positions only
        again = loader(workers=1)  # (the workers may change: blocks are packed alike by any)
        again.load_state_dict(state)
        rest = list(again)
        if stop <= per_epoch:
            rest += list(again)
        assert len(rest) == len(whole) - stop, stop
        for a, b in zip(rest, whole[stop:]):
            for f in FIELDS:
                assert torch.equal(a[f], b[f]), (stop, f)
            assert [c.tolist() for c in a["cu_seqlens"]] == [c.tolist() for c in b["cu_seqlens"]]


def ranks_loader(monkeypatch, seqs, world, rank, workers, batch):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    return stoker.DataLoader(seqs, batch_size=batch, num_workers=workers, distributed=True)


@pytest.mark.parametrize("mode", ["concat", "best_fit"])
def test_resumed_on_4_3_6_1_ranks_every_document_token_of_the_epoch_comes_once(tmp_path, monkeypatch, mode):
    path, tok, texts = write_corpus(str(tmp_path), n=241, seed=3)
    ids = [e.ids + [EOS] for e in tok.encode_batch(texts)]
    seqs = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tok), 32, mode, eos_id=EOS, block_documents=9)
    got, states = collections.Counter(), None
    for world, workers, batch, stop in [(4, 2, 5, 3), (3, 1, 7, 2), (6, 0, 2, 1), (1, 2, 4, None)]:
        new = []
        for rank in range(world):
            loader = ranks_loader(monkeypatch, seqs, world, rank, workers, batch)
            if states is not None:
                loader.load_state_dict(states)  # (every rank's own state: a list)
            it = iter(loader)
            for k, b in enumerate(it):
                got.update(pairs(b))
                if k + 1 == stop:
                    break
            del it
            new.append(loader.state_dict())
        states = new
    assert loader.stats()["pack"]["segments"] == 3
    assert got == collections.Counter((d, t) for d, x in enumerate(ids) for t in x)


def test_a_rank_through_its_share_keeps_the_epochs_topologies_in_the_state(tmp_path, monkeypatch):
    # After a resume on another world size, rank 0 reads its share to the
    # end (its state says: the next epoch) while the others stop.  Rank 0's
    # gathered state must still carry the epoch's earlier topology, so the
    # next resume deals the rest right, on another world size and on the
    # same one (where rank 0, through the epoch, reads nothing more of it).
    path, tok, texts = write_corpus(str(tmp_path), n=160, seed=4)
    ids = [e.ids + [EOS] for e in tok.encode_batch(texts)]
    seqs = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tok), 32, "concat", eos_id=EOS, block_documents=8)
    everything = collections.Counter((d, t) for d, x in enumerate(ids) for t in x)
    for last_world in (2, 3):
        got, state = collections.Counter(), None
        for world, stop in [(2, [6, 6]), (3, [None, 1, 1]), (last_world, [None] * last_world)]:
            new = []
            for rank in range(world):
                loader = ranks_loader(monkeypatch, seqs, world, rank, 1, 3)
                if state is not None:
                    loader.load_state_dict(state)
                    if loader._loaded == (0, 0) and loader._epoch == 1:
                        continue  # (through the epoch: its next pass is the next epoch)
                for k, b in enumerate(loader):
                    got.update(pairs(b))
                    if k + 1 == stop[rank]:
                        break
                new.append(loader.state_dict())
            # What state_dict() gathers over torch.distributed, as rank 0 has it.
            state = dict(new[0], ranks={r: m for s in new for r, m in s["ranks"].items()})
        assert got == everything, last_world


def test_a_resume_it_cannot_make_exact_is_refused_with_why(tmp_path, monkeypatch):
    path, tok, _ = write_corpus(str(tmp_path), n=80)
    ds = stoker.text.TextDataset(path, tokenizer=tok)
    seqs = stoker.text.Pack(ds, 32, "concat", block_documents=10)
    one = ranks_loader(monkeypatch, seqs, 2, 0, 0, 4)
    next(iter(one))
    state = one.state_dict()  # (no torch.distributed: rank 0's position only)
    with pytest.raises(ValueError, match=r"rank\(s\) \[1\] are missing"):
        ranks_loader(monkeypatch, seqs, 3, 0, 0, 4).load_state_dict(state)
    with pytest.raises(ValueError, match=r"holds the position of rank\(s\) \[0\] only, not of rank 1"):
        ranks_loader(monkeypatch, seqs, 2, 1, 0, 4).load_state_dict(state)
    other = stoker.text.Pack(ds, 64, "concat", block_documents=10)
    with pytest.raises(ValueError, match=r"saved by a Pack with seq_len=32, this one has seq_len=64"):
        stoker.DataLoader(other, batch_size=4).load_state_dict(state)
    with pytest.raises(ValueError, match="not the state of a loader of a PackedStream"):
        stoker.DataLoader(seqs, batch_size=4).load_state_dict({"kind": "x"})
    with pytest.raises(ValueError, match="takes no sampler"):
        stoker.DataLoader(seqs, batch_size=4, sampler=range(3))
    with pytest.raises(ValueError, match=r"read in order \(in_order=True\)"):
        stoker.DataLoader(seqs, batch_size=4, in_order=False)
    with pytest.raises(ValueError, match="give shuffle= to the Pack"):
        stoker.DataLoader(seqs, batch_size=4, shuffle=False)
    with pytest.raises(TypeError, match="no length before its blocks are packed"):
        len(seqs)
    with pytest.raises(ValueError, match="block_documents should be an int >= 1"):
        stoker.text.Pack(ds, 32, block_documents=0)


def test_bad_lines_are_skipped_and_counted_while_packing(tmp_path):
    path, tok, texts = write_corpus(str(tmp_path), n=50)
    with open(path, "ab") as f:
        f.write(b'{"text": "broken\n' + b'{"text": "\xff"}\n')
    seqs = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tok, on_error="skip"), 32, "concat",
                            block_documents=16)
    loader = stoker.DataLoader(seqs, batch_size=4, num_workers=2)
    got = sum((pairs(b) for b in loader), collections.Counter())
    assert got == collections.Counter((d, t) for d, e in enumerate(tok.encode_batch(texts)) for t in e.ids)
    assert loader.stats()["pack"]["skipped"] == 2
    raising = stoker.text.Pack(stoker.text.TextDataset(path, tokenizer=tok), 32, "concat", block_documents=16)
    with pytest.raises(Exception, match=r"web.jsonl, document 5[01] \(byte \d+\) is not"):
        list(stoker.DataLoader(raising, batch_size=4, num_workers=1))


def test_token_files_packed_again_each_epoch_with_repack(tmp_path):
    from test_text import corpus, write_megatron
    rng = np.random.default_rng(9)
    docs = corpus(rng, 300, 5000, longest=90)
    write_megatron(tmp_path / "web", docs)
    tokens = stoker.text.TokenDataset(tmp_path / "web")
    seqs = stoker.text.Pack(tokens, 64, "best_fit", eos_id=4999, repack=True, block_documents=50)
    assert isinstance(seqs, stoker.text.PackedStream)
    loader = stoker.DataLoader(seqs, batch_size=4, num_workers=2)
    everything = collections.Counter((d, t) for d, x in enumerate(docs) for t in list(x) + [4999])
    first, second = list(loader), list(loader)
    for epoch in (first, second):
        assert sum((pairs(b) for b in epoch), collections.Counter()) == everything
    assert not torch.equal(first[0]["input_ids"], second[0]["input_ids"])  # packed anew
    # The same fields as the fixed Pack's for the same pieces: the reference packer over the block.
    with_eos = [list(x) + [4999] for x in docs]
    block = sorted((int(d) for d in seqs.block_docs(0, 0)), key=lambda d: -len(with_eos[d]))
    want = sorted(tuple(reference_fields(with_eos, p, 64))
                  for p in reference_pack({d: len(with_eos[d]) for d in block}, block, 64, "best_fit", window=1024))
    rows = [(b["input_ids"][i].tolist(), b["labels"][i].tolist(), b["position_ids"][i].tolist(),
             b["document_ids"][i].tolist(), b["cu_seqlens"][i].tolist()) for b in first for i in range(len(b["input_ids"]))]
    assert sorted(rows[:len(want)]) == want
    with pytest.raises(TypeError, match="repack=True packs a TokenDataset again each epoch"):
        stoker.text.Pack(stoker.Mix([tokens, tokens], [1, 1]), 64, repack=True)
