"""Regenerates the seed corpus of tests/fuzz (small, checked in).

    PYTHONPATH=python python tests/fuzz/make_corpus.py

TFRecord seeds start with the mode byte the target reads (0: checked
container, 1: unchecked, 2: a bare Example)."""
import io as pyio
import os
import struct
import tarfile
import tempfile

import numpy as np

from stoker import io

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(kind, name, data: bytes):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    with open(os.path.join(HERE, kind, name), "wb") as f:
        f.write(data)


def main():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "a.tfrecord")
        io.write_tfrecord(p, ({"x": np.arange(6, dtype=np.float32) + i, "y": i,
                               "raw": np.array([i, 1, 2, 3], np.int16).tobytes(),
                               "h": np.array([0.5, -2.0], np.float32)} for i in range(3)))
        data = open(p, "rb").read()
        put("tfrecord", "three_records", b"\x00" + data)
        put("tfrecord", "three_records_unchecked", b"\x01" + data)
        (length,) = struct.unpack("<Q", data[:8])
        put("tfrecord", "example", b"\x02" + data[12:12 + length])
        put("tfrecord", "truncated", b"\x00" + data[:-5])
        put("tfrecord", "empty", b"\x00")
        paths = io.write_tar_shards(os.path.join(d, "s-%d.tar"),
                                    ({"__key__": f"k{i}", "npy": np.full((2,), i, np.float32), "cls": i,
                                      "bin": np.arange(4, dtype=np.int32), "txt": "ab"} for i in range(3)))
        put("tar", "shard", open(paths[0], "rb").read())
    buf = pyio.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, payload in [("d" * 110 + "/k.cls", b"7"), ("../up.cls", b"1"), ("k.bin", b"\0" * 16)]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            t.addfile(info, pyio.BytesIO(payload))
        ln = tarfile.TarInfo("l.cls")
        ln.type = tarfile.SYMTYPE
        ln.linkname = "/etc/passwd"
        t.addfile(ln)
    put("tar", "pax_unsafe_link", buf.getvalue())
    buf = pyio.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo("x" * 150 + ".cls")
        info.size = 1
        t.addfile(info, pyio.BytesIO(b"5"))
    put("tar", "gnu_longname", buf.getvalue())
    images()


def images():
    """Small JPEGs and PNGs of every mode the decoders convert, and damaged
    ones; the first byte is the target's random word."""
    from PIL import Image
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (12, 17, 3), dtype=np.uint8))
    for mode, fmt in [("RGB", "JPEG"), ("L", "JPEG"), ("CMYK", "JPEG"), ("RGB", "PNG"), ("L", "PNG"),
                      ("LA", "PNG"), ("RGBA", "PNG"), ("P", "PNG"), ("I;16", "PNG")]:
        buf = pyio.BytesIO()
        im = rgb.convert(mode) if mode != "I;16" else Image.fromarray(rng.integers(0, 65536, (9, 5), dtype=np.uint16))
        im.save(buf, fmt, **({"quality": 75} if fmt == "JPEG" else {}))
        data = buf.getvalue()
        name = f"{fmt.lower()}_{mode.replace(';', '')}"
        put("image", name, b"\x07" + data)
        put("image", name + "_truncated", b"\x03" + data[: len(data) * 2 // 3])
    buf = pyio.BytesIO()
    rgb.save(buf, "JPEG", progressive=True, quality=60)
    put("image", "jpeg_progressive", b"\x01" + buf.getvalue())
    put("image", "empty", b"\x00")


if __name__ == "__main__":
    main()
