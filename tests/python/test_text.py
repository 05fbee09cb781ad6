"""stoker.text.TokenDataset (issue 50, in part): Megatron's .bin/.idx in
every integer dtype it writes, flat token files and .npy, read natively as
documents; the bad inputs named by file, document and byte."""
import collections
import json
import os
import pickle
import struct

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

import stoker
from stoker.text import TokenDataset

CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6, np.float32: 7,
         np.uint16: 8}


def write_megatron(prefix, docs, dtype=np.uint16):
    """Megatron's MMapIndexedDataset writer, one sequence per document."""
    docs = [np.asarray(d, dtype) for d in docs]
    with open(f"{prefix}.bin", "wb") as f:
        for d in docs:
            f.write(d.tobytes())
    sizes = np.array([len(d) for d in docs], np.int32)
    pointers = np.concatenate([[0], np.cumsum(sizes.astype(np.int64) * np.dtype(dtype).itemsize)[:-1]]).astype(np.int64)
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", CODES[dtype]))
        f.write(struct.pack("<Q", len(docs)) + struct.pack("<Q", len(docs) + 1))
        f.write(sizes.tobytes() + pointers.tobytes() + np.arange(len(docs) + 1, dtype=np.int64).tobytes())


def corpus(rng, n, vocab, longest=300):
    return [rng.integers(0, vocab, rng.integers(0, longest)) for _ in range(n)]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64])
def test_megatron_files_of_every_integer_dtype_read_as_their_documents(tmp_path, dtype):
    rng = np.random.default_rng(int(CODES[dtype]))
    vocab = min(int(np.iinfo(dtype).max), 100_000)
    docs = corpus(rng, 57, vocab) + [[], [vocab - 1]]
    write_megatron(tmp_path / "web", docs, dtype)
    ds = TokenDataset(tmp_path / "web")
    assert len(ds) == len(docs) and ds.tokens == sum(len(d) for d in docs)
    assert ds.document_lengths.tolist() == [len(d) for d in docs]
    for i, d in enumerate(docs):
        assert ds[i]["input_ids"].tolist() == list(d), i
    loader = stoker.DataLoader(ds, batch_size=8, num_workers=2)
    got = [t.tolist() for b in loader for t in b["input_ids"]]
    assert got == [list(d) for d in docs]
    assert loader.stats()["native"]["threads"] == 2  # read by C++ threads


def test_flat_token_files_split_at_the_end_of_document_id_and_npy_and_many_files_as_one(tmp_path):
    eos = 50256
    flat = np.array([5, 7, eos, 9, eos, eos, 11, 12], np.uint16)  # nanoGPT's train.bin
    flat.tofile(tmp_path / "train.bin")
    np.save(tmp_path / "more.npy", np.array([1, eos, 2, 3], np.uint32))
    write_megatron(tmp_path / "mega", [[4, 4], [8]])
    ds = TokenDataset([tmp_path / "train.bin", tmp_path / "more.npy", tmp_path / "mega.idx"], dtype="uint16",
                      eos_id=eos, output_dtype="int32")
    want = [[5, 7, eos], [9, eos], [eos], [11, 12], [1, eos], [2, 3], [4, 4], [8]]
    assert [ds[i]["input_ids"].tolist() for i in range(len(ds))] == want
    assert ds[0]["input_ids"].dtype == np.int32 or str(ds[0]["input_ids"].dtype) == "torch.int32"
    # A directory is its files in name order (the .idx of a pair stands with its .bin), a glob likewise.
    assert len(TokenDataset(tmp_path, dtype="uint16", eos_id=eos)) == len(want)
    assert len(TokenDataset(str(tmp_path / "*.bin"), dtype="uint16", eos_id=eos)) == 4 + 2
    assert len(TokenDataset(str(tmp_path / "*.idx"))) == 2  # (the Megatron pair, by its .idx)
    # Without eos_id a flat file is one document.
    assert TokenDataset(tmp_path / "train.bin", dtype="uint16")[0]["input_ids"].tolist() == flat.tolist()
    # Pickled by its arguments (spawned workers, a Python transform).
    again = pickle.loads(pickle.dumps(ds))
    assert len(again) == len(ds) and again[6]["input_ids"].tolist() == [4, 4]
    mapped = ds.map(lambda x: x + 1, field="input_ids")
    lists = stoker.DataLoader(mapped, batch_size=3, num_workers=2, collate_fn=lambda b: [x["input_ids"] for x in b])
    got = [t.tolist() for b in lists for t in b]
    assert got == [[v + 1 for v in d] for d in want]


def test_bad_token_files_are_named_with_the_document_and_the_byte(tmp_path):
    write_megatron(tmp_path / "m", [[1, 2, 3], [4, 5]])
    os.truncate(tmp_path / "m.bin", 8)
    with pytest.raises(ValueError, match=r"m.bin ends at byte 8, and document 1 of .*m.idx ends at byte 10 "
                                         r"\(a truncated .bin\?\)"):
        TokenDataset(tmp_path / "m")
    write_megatron(tmp_path / "m", [[1, 2, 3], [4, 5]])
    write_megatron(tmp_path / "other", [[1, 2, 3, 4]])
    os.replace(tmp_path / "other.idx", tmp_path / "m.idx")
    with pytest.raises(ValueError, match=r"m.bin is 10 bytes, and .*m.idx's documents take 8: the .idx is not "
                                         r"this .bin's"):
        TokenDataset(tmp_path / "m.bin")
    write_megatron(tmp_path / "f", [[1.5]], np.float32)
    with pytest.raises(ValueError, match="f.idx: its .bin holds float32 elements, not token ids"):
        TokenDataset(tmp_path / "f")
    np.zeros(3, np.uint8).tofile(tmp_path / "odd.bin")
    with pytest.raises(ValueError, match="odd.bin has no .idx beside it, so it is a flat token file: say its dtype"):
        TokenDataset(tmp_path / "odd.bin")
    with pytest.raises(ValueError, match="odd.bin is 3 bytes, not a whole number of uint16 tokens"):
        TokenDataset(tmp_path / "odd.bin", dtype="uint16")
    with pytest.raises(ValueError, match="not a token file"):
        TokenDataset(tmp_path / "nothing")
    # A token outside the vocabulary: raised naming it, or skipped and counted.
    write_megatron(tmp_path / "v", [[1, 2], [3, 900, 4], [5]])
    with pytest.raises(ValueError, match=r"token 900 at token 1 of document 1 of .*v.bin \(byte 6\) is outside the "
                                         r"vocabulary \(vocab_size=512\)"):
        list(stoker.DataLoader(TokenDataset(tmp_path / "v", vocab_size=512), batch_size=1, num_workers=2))
    ds = TokenDataset(tmp_path / "v", vocab_size=512, on_error="skip")
    loader = stoker.DataLoader(ds, batch_size=1, num_workers=1)
    assert [t.tolist() for b in loader for t in b["input_ids"]] == [[1, 2], [5]]
    assert loader.stats()["native"]["skipped"] == 1


def web_and_code(tmp_path, seed, sizes, vocab, longest):
    """Two corpora as Megatron files, mixed 3 to 1."""
    rng = np.random.default_rng(seed)
    web, code = corpus(rng, sizes[0], vocab, longest), corpus(rng, sizes[1], vocab, longest)
    write_megatron(tmp_path / "web", web)
    write_megatron(tmp_path / "code", code)
    mix = stoker.Mix({"web": TokenDataset(tmp_path / "web"), "code": TokenDataset(tmp_path / "code")},
                     {"web": 3, "code": 1}, seed=seed - 1)
    return web, code, mix


def test_token_datasets_mix_natively_by_weight(tmp_path):
    web, code, mix = web_and_code(tmp_path, 1, (300, 100), 1000, 40)
    loader = stoker.DataLoader(mix, batch_size=40, shuffle=True, num_workers=2)
    docs = [tuple(t.tolist()) for b in loader for t in b["input_ids"]]
    assert loader.stats()["native"]["threads"] == 2
    assert len(docs) == 400
    from_web = sum(d in {tuple(x) for x in web} for d in docs[:100])
    assert abs(from_web - 75) <= 1


# ---- packing ----------------------------------------------------------------

def reference_pack(lengths, order, seq_len, mode, window=None):
    """The packer written out plainly: [(doc, offset, length), ...] per sequence."""
    seqs = []
    if mode == "concat":
        cur, room = [], seq_len
        for d in order:
            at = 0
            while at < lengths[d]:
                take = min(room, lengths[d] - at)
                cur.append((d, at, take))
                at, room = at + take, room - take
                if room == 0:
                    seqs.append(cur)
                    cur, room = [], seq_len
        if cur:
            seqs.append(cur)
        return seqs
    open_bins, next_id = [], 0  # [room, id, pieces]
    for d in order:
        n, at = lengths[d], 0
        while n - at >= seq_len:
            seqs.append([(d, at, seq_len)])
            at += seq_len
        if at == n:
            continue
        piece = (d, at, n - at)
        fits = [b for b in open_bins if b[0] >= piece[2]]
        if fits:
            b = min(fits, key=lambda b: (b[0], b[1]))
        else:
            if len(open_bins) == window:
                fullest = min(open_bins, key=lambda b: (b[0], b[1]))
                open_bins.remove(fullest)
                seqs.append(fullest[2])
            b = [seq_len, next_id, []]
            next_id += 1
            open_bins.append(b)
        b[0] -= piece[2]
        b[2].append(piece)
        if b[0] == 0:
            open_bins.remove(b)
            seqs.append(b[2])
    seqs += [b[2] for b in sorted(open_bins, key=lambda b: b[1])]
    return seqs


def reference_fields(docs, pieces, seq_len, pad_id=0):
    ids, labels, pos, doc_ids, cu = [], [], [], [], [0]
    for d, at, n in pieces:
        tokens = list(docs[d])
        ids += tokens[at:at + n]
        labels += [tokens[k + 1] if k + 1 < len(tokens) else -100 for k in range(at, at + n)]
        pos += list(range(n))
        doc_ids += [d] * n
        cu.append(len(ids))
    pad = seq_len - len(ids)
    if pad:
        ids += [pad_id] * pad
        labels += [-100] * pad
        pos += list(range(pad))
        doc_ids += [-1] * pad
        cu.append(seq_len)
    return ids, labels, pos, doc_ids, cu


@pytest.mark.parametrize("mode", ["concat", "best_fit"])
def test_packed_sequences_equal_a_reference_packer_and_hold_every_token_once(tmp_path, mode):
    rng = np.random.default_rng(7)
    docs = corpus(rng, 400, 5000, longest=260) + [list(range(1, 700))]  # one longer than seq_len
    write_megatron(tmp_path / "web", docs)
    seq_len, eos = 128, 4999
    with_eos = [list(d) + [eos] for d in docs]
    pack = stoker.text.Pack(TokenDataset(tmp_path / "web"), seq_len, mode, window=16, eos_id=eos, pad_id=3,
                            shuffle=False)
    want = reference_pack([len(d) for d in with_eos], range(len(docs)), seq_len, mode, window=16)
    assert len(pack) == len(want) == pack.sequences
    for i, pieces in enumerate(want):
        s = pack[i]
        ids, labels, pos, doc_ids, cu = reference_fields(with_eos, pieces, seq_len, pad_id=3)
        assert s["input_ids"].tolist() == ids, i
        assert s["labels"].tolist() == labels, i
        assert s["position_ids"].tolist() == pos and s["document_ids"].tolist() == doc_ids, i
        assert s["cu_seqlens"].tolist() == cu, i
    # Every token of every document once.
    tokens = collections.Counter()
    for i in range(len(pack)):
        s = pack[i]
        for d, p, k in zip(s["document_ids"].tolist(), s["position_ids"].tolist(), range(seq_len)):
            if d >= 0:
                tokens[d] += 1
    assert tokens == collections.Counter({d: len(t) for d, t in enumerate(with_eos)})
    if mode == "concat":
        assert pack.padding_fraction < 1 / len(pack)  # the last sequence's only
    else:
        # A document is cut only into whole sequences and a rest (700 tokens: five and a rest).
        pieces = collections.Counter(p[0] for seq in want for p in seq)
        assert pieces == {d: -(-len(t) // seq_len) for d, t in enumerate(with_eos)}
        assert pieces[len(docs) - 1] == 6
        assert pack.padding_fraction < 0.05


def test_a_shuffled_pack_resumes_bit_identical_at_any_step(tmp_path):
    rng = np.random.default_rng(3)
    write_megatron(tmp_path / "web", corpus(rng, 500, 5000, longest=200))
    pack = stoker.text.Pack(TokenDataset(tmp_path / "web"), 64, "best_fit", window=8, seed=2)

    def loader():
        return stoker.DataLoader(pack, batch_size=6, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(11))
    whole = [{k: v.clone() if hasattr(v, "clone") else [c.clone() for c in v] for k, v in b.items()} for b in loader()]
    assert whole[0]["input_ids"].shape == (6, 64)
    for stop in sorted(rng.choice(len(whole) - 1, 3, replace=False) + 1):
        first = loader()
        it = iter(first)
        for _ in range(stop):
            next(it)
        state = first.state_dict()
        del it
        again = loader()
        again.load_state_dict(state)
        rest = list(again)
        assert len(rest) == len(whole) - stop
        for a, b in zip(rest, whole[stop:]):
            for k in ("input_ids", "labels", "position_ids", "document_ids"):
                assert torch.equal(a[k], b[k]), (stop, k)
            assert [c.tolist() for c in a["cu_seqlens"]] == [c.tolist() for c in b["cu_seqlens"]]
    flat = stoker.text.cu_seqlens(whole[0])
    assert flat[0] == 0 and flat[-1] == 6 * 64 and flat.dtype == torch.int32
    assert (flat[1:] > flat[:-1]).all()


def test_a_pack_resumed_on_other_ranks_covers_each_sequence_once_and_a_mix_packs_by_weight(tmp_path):
    from test_elastic_resume import run_segments
    _, _, mix = web_and_code(tmp_path, 2, (600, 200), 5000, 120)
    pack = stoker.text.Pack(mix, 96, "concat", eos_id=4999)
    # Along the packed stream, the mix's proportions: 3 web documents to 1 of code.
    first_docs = []
    for i in range(len(pack)):
        for d in pack[i]["document_ids"].tolist():
            if d >= 0 and (not first_docs or first_docs[-1] != d):
                first_docs.append(d)
    web_share = sum(d < 600 for d in first_docs[:400]) / 400
    assert abs(web_share - 0.75) < 0.01

    def make(world, rank, workers, batch):
        return stoker.DataLoader(pack, batch_size=batch, num_workers=workers,
                                 sampler=DistributedSampler(pack, num_replicas=world, rank=rank, shuffle=True, seed=3))

    def ids(b):
        return [hash(tuple(row)) for row in (b["document_ids"] * 1000 + b["position_ids"]).tolist()]
    counts, _ = run_segments(make, [(3, 2, 5, 2), (2, 1, 7, 1), (1, 0, 4, None)], ids=ids)
    want = collections.Counter(hash(tuple((pack[i]["document_ids"] * 1000 + pack[i]["position_ids"]).tolist()))
                               for i in range(len(pack)))
    assert counts == want


def test_bad_packs_are_named(tmp_path):
    write_megatron(tmp_path / "m", [[1, 2, 3]])
    with pytest.raises(TypeError, match="Pack: packs a stoker.text.TokenDataset, a stoker.Mix of them or a TextDataset"):
        stoker.text.Pack(list(range(3)), 8)
    with pytest.raises(ValueError, match="seq_len should be an int >= 1"):
        stoker.text.Pack(TokenDataset(tmp_path / "m"), 0)
    with pytest.raises(ValueError, match="mode='pad' is not one of"):
        stoker.text.Pack(TokenDataset(tmp_path / "m"), 8, "pad")


# ---- tokenizing on the fly ----------------------------------------------------

def train_tokenizer(texts, path):
    """A small BPE tokenizer trained here (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=500, special_tokens=["[UNK]", "<eos>"]))
    tok.save(str(path))
    return tok


CORPUS = ["Hello world.", "", "Ünïcödé — 日本語のテキスト, emoji 🚀🚀", "a " * 3000, "tabs\tand\nnewlines",
          "the quick brown fox jumps over the lazy dog " * 20, "ok"]


def test_text_is_tokenized_exactly_as_encode_batch_through_the_loader(tmp_path):
    pytest.importorskip("tokenizers")
    tok = train_tokenizer(CORPUS * 3, tmp_path / "tokenizer.json")
    lines = []
    for i, t in enumerate(CORPUS * 5):
        lines.append(json.dumps({"text": t, "id": i}, ensure_ascii=i % 2 == 0))
        if i % 7 == 3:
            lines.append("   ")  # a blank line: no document
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:20]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[20:]))  # (no newline at the end)
    ds = stoker.text.TextDataset(tmp_path, tokenizer=tmp_path / "tokenizer.json", eos_id=1)
    want = [e.ids + [1] for e in tok.encode_batch(CORPUS * 5)]
    assert len(ds) == len(want)
    assert ds[3]["input_ids"].tolist() == want[3]
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=stoker.text.collate_documents)
    got = [t.tolist() for b in loader for t in b["input_ids"]]
    assert got == want
    # A Tokenizer object, and resume of the documents' order like any map-style dataset.
    ds2 = stoker.text.TextDataset([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tokenizer=tok)
    assert [ds2[i]["input_ids"].tolist() for i in range(len(ds2))] == [w[:-1] for w in want]


def test_bad_lines_are_named_with_the_file_the_document_and_the_byte(tmp_path):
    pytest.importorskip("tokenizers")
    train_tokenizer(CORPUS, tmp_path / "tok.json")
    good = json.dumps({"text": "fine"})
    (tmp_path / "bad.jsonl").write_bytes(
        (good + "\n" + '{"text": "broken' + "\n" + '{"body": "no text"}' + "\n").encode() +
        b'{"text": "\xff\xfe"}\n' + (good + "\n").encode())
    ds = stoker.text.TextDataset(tmp_path / "bad.jsonl", tokenizer=tmp_path / "tok.json")
    with pytest.raises(ValueError, match=r"bad.jsonl, document 1 \(byte 17\) is not JSON \(Unterminated string"):
        ds[1]
    with pytest.raises(ValueError, match=r"document 2 \(byte 34\) has no text field 'text'"):
        ds[2]
    with pytest.raises(ValueError, match=r"document 3 \(byte 54\) is not UTF-8 \(byte 64"):
        ds[3]
    skip = stoker.text.TextDataset(tmp_path / "bad.jsonl", tokenizer=tmp_path / "tok.json", on_error="skip")
    got = skip.__getitems__(list(range(len(skip))))
    assert len(got) == 2 and skip.skipped == 3
    with pytest.raises(ValueError, match="is gzip"):
        stoker.text.TextDataset(tmp_path / "x.jsonl.gz", tokenizer=tmp_path / "tok.json")
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        stoker.text.TextDataset(tmp_path / "bad.jsonl", tokenizer=tmp_path / "none.json")


def test_zstd_json_lines_and_a_sentencepiece_model(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    spm = pytest.importorskip("sentencepiece")
    texts = [t for t in CORPUS if t] * 20 + [f"line {i} of the corpus, with words" for i in range(200)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(tmp_path / "sp"), vocab_size=80,
                                   character_coverage=1.0, minloglevel=2)
    body = "\n".join(json.dumps({"body": t}) for t in texts).encode()
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(body))
    ds = stoker.text.TextDataset(tmp_path / "c.jsonl.zst", field="body", tokenizer=tmp_path / "sp.model")
    want = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model")).encode(texts)
    assert len(ds) == len(texts)
    loader = stoker.DataLoader(ds, batch_size=16, num_workers=2, collate_fn=stoker.text.collate_documents)
    assert [x.tolist() for b in loader for x in b["input_ids"]] == want
    again = pickle.loads(pickle.dumps(ds))  # (a process started afresh decompresses again)
    assert again[5]["input_ids"].tolist() == want[5]
    (tmp_path / "cut.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(body)[:-9])
    with pytest.raises(ValueError, match="cut.jsonl.zst is not a whole zstd stream"):
        stoker.text.TextDataset(tmp_path / "cut.jsonl.zst", tokenizer=tmp_path / "sp.model")


def test_parquet_text_columns_tokenize_as_encode_batch_and_a_null_is_named_or_skipped(tmp_path):
    pytest.importorskip("tokenizers")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    tok = train_tokenizer(CORPUS * 3, tmp_path / "tokenizer.json")
    texts = CORPUS * 4
    pq.write_table(pa.table({"text": texts[:15], "n": list(range(15))}), tmp_path / "a.parquet", row_group_size=4)
    pq.write_table(pa.table({"text": texts[15:], "n": list(range(15, len(texts)))}), tmp_path / "b.parquet")
    ds = stoker.text.TextDataset([tmp_path / "a.parquet", tmp_path / "b.parquet"], tokenizer=tmp_path / "tokenizer.json",
                                 eos_id=1)
    want = [e.ids + [1] for e in tok.encode_batch(texts)]
    assert len(ds) == len(want)
    loader = stoker.DataLoader(ds, batch_size=5, num_workers=2, collate_fn=stoker.text.collate_documents)
    assert [t.tolist() for b in loader for t in b["input_ids"]] == want
    with pytest.raises(ValueError, match="the Parquet column 'n' is int64, not text"):
        stoker.text.TextDataset(tmp_path / "a.parquet", field="n", tokenizer=tok)
    pq.write_table(pa.table({"text": ["one", None, "three"]}), tmp_path / "nulls.parquet")
    strict = stoker.text.TextDataset(tmp_path / "nulls.parquet", tokenizer=tok)
    with pytest.raises(ValueError, match=r"nulls\.parquet, row group 0, column 'text': row 1 is null"):
        strict[1]
    lenient = stoker.text.TextDataset(stoker.io.ParquetDataset(tmp_path / "nulls.parquet"), tokenizer=tok,
                                      on_error="skip")
    assert len(lenient.__getitems__([0, 1, 2])) == 2 and lenient.skipped == 1
