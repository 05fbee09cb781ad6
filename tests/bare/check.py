"""Run inside the bare Debian 12 root that scripts/bare_system.sh builds (only
python3 and python3-venv from apt; stoker's repaired wheel, torch and numpy
from pip): the drop-in loader, a TFRecord read, an HTTP stream and an image
decode, with nothing from apt that stoker's extension needs.  Exits non-zero
on the first failure."""
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import torch

import stoker
from stoker import cache, io


def extension_libraries() -> list[str]:
    """What the dynamic loader resolves for the three extension modules
    (_stoker, _stoker_remote with libcurl, _stoker_vision with the image
    codecs): every library outside the manylinux
    policy's (glibc's, libstdc++, libgcc_s, zlib) must come from the wheel."""
    here = os.path.dirname(stoker.__file__)
    lines = []
    allowed = ("linux-vdso", "libc.so", "libm.so", "libpthread", "libdl.so", "librt.so", "ld-linux",
               "libresolv.so", "libnsl.so", "libutil.so", "libstdc++", "libgcc_s", "libz.so.1")
    for ext in sorted(f for f in os.listdir(here) if f.endswith(".so")):
        out = subprocess.run(["ldd", os.path.join(here, ext)], capture_output=True, text=True, check=True).stdout
        assert "not found" not in out, out
        outside = [line.strip() for line in out.splitlines()
                   if line.strip() and "stoker.libs" not in line and not any(a in line for a in allowed)]
        assert not outside, f"{ext} loads system libraries the wheel should carry: {outside}"
        lines += [ext + ":"] + out.splitlines()
    for module in ("_stoker.", "_stoker_remote", "_stoker_vision"):
        assert any(line.startswith(module) for line in lines), (module, lines)
    return lines


def remote_stores_mapped() -> bool:
    """_stoker_remote (with libcurl, linked in or beside it) or libcurl."""
    return any("libcurl" in line or "_stoker_remote" in line for line in open("/proc/self/maps"))


def drop_in_loader():
    ds = torch.utils.data.TensorDataset(torch.arange(1000.0))
    total = sum(float(b[0].sum()) for b in stoker.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2))
    assert total == sum(range(1000)), total


def tfrecord(d):
    path = os.path.join(d, "a.tfrecord")
    io.write_tfrecord(path, ({"x": np.full(16, i, np.float32), "y": np.int64(i)} for i in range(100)))
    ds = io.TFRecordDataset(path, features={"x": ("float32", (16,)), "y": ("int64", ())})
    ys = [int(v) for b in stoker.DataLoader(ds, batch_size=10, num_workers=2) for v in b["y"]]
    assert ys == list(range(100)), ys


def http_stream(d):
    remote = os.path.join(d, "remote")
    os.makedirs(remote)
    for s in range(3):
        io.write_tfrecord(os.path.join(remote, f"shard-{s}.tfrecord"),
                          ({"x": np.full(8, i, np.float32), "y": np.int64(i)} for i in range(s * 50, s * 50 + 50)))
    cache.write_index(remote)
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"], cwd=remote,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
        port = int(line.split(" port ")[1].split()[0])
        url = f"http://127.0.0.1:{port}"
        for _ in range(50):
            try:
                urllib.request.urlopen(url + "/index.txt", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        ds = cache.StreamingDataset(url, os.path.join(d, "cache"), max_bytes=1 << 30, mode="full",
                                    features={"x": ("float32", (8,)), "y": ("int64", ())})
        ys = sorted(int(v) for b in stoker.DataLoader(ds, batch_size=16, num_workers=2) for v in b["y"])
        assert ys == list(range(150)), ys[:10]
    finally:
        server.terminate()
        server.wait(timeout=10)


def vision_mapped() -> bool:
    return any("_stoker_vision" in line for line in open("/proc/self/maps"))


def image(jpeg_path):
    assert not vision_mapped(), "the image codecs were loaded before stoker.vision was imported"
    from stoker import vision
    assert vision_mapped()
    data = open(jpeg_path, "rb").read()[1:]  # (the fuzz corpus' first byte is its random word)
    img = vision.decode_image(data)
    assert img.ndim == 3 and img.shape[2] == 3, img.shape


def main():
    libs = extension_libraries()
    print("extension libraries:\n  " + "\n  ".join(line.strip() for line in libs))
    with tempfile.TemporaryDirectory() as d:
        for name, fn in [("drop-in DataLoader", drop_in_loader), ("TFRecord read", lambda: tfrecord(d)),
                         ("HTTP stream", lambda: http_stream(d)), ("JPEG decode", lambda: image(sys.argv[1]))]:
            if name == "HTTP stream":  # (libcurl is loaded with the first http(s):// or s3:// store)
                assert not remote_stores_mapped(), "the loader and a TFRecord read mapped libcurl"
            fn()
            print(f"ok: {name}", flush=True)
        assert remote_stores_mapped()
    print(f"bare-system check passed (stoker {stoker.__version__}, torch {torch.__version__}, "
          f"python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
