"""stoker.text.TokenDataset (issue 50, in part): Megatron's .bin/.idx in
every integer dtype it writes, flat token files and .npy, read natively as
documents; the bad inputs named by file, document and byte."""
import os
import pickle
import struct

import numpy as np
import pytest

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


def test_token_datasets_mix_natively_by_weight(tmp_path):
    rng = np.random.default_rng(1)
    web, code = corpus(rng, 300, 1000, 40), corpus(rng, 100, 1000, 40)
    write_megatron(tmp_path / "web", web)
    write_megatron(tmp_path / "code", code)
    mix = stoker.Mix({"web": TokenDataset(tmp_path / "web"), "code": TokenDataset(tmp_path / "code")},
                     {"web": 3, "code": 1}, seed=0)
    loader = stoker.DataLoader(mix, batch_size=40, shuffle=True, num_workers=2)
    docs = [tuple(t.tolist()) for b in loader for t in b["input_ids"]]
    assert loader.stats()["native"]["threads"] == 2
    assert len(docs) == 400
    from_web = sum(d in {tuple(x) for x in web} for d in docs[:100])
    assert abs(from_web - 75) <= 1
