"""JPEG images through three loaders, side by side, on one machine.

    python bench/images.py --images 3000 --rounds 3

A folder of ImageNet-like JPEGs (500x375, quality 90, ~90 KB; made once by
stoker.bench.images.make_images and kept under --root), page-cached, batch
64, 2 workers, shuffled.  Two pipelines:
  train: RandomResizedCrop(224), RandomHorizontalFlip, float32 0..1, Normalize
  eval:  Resize(256), CenterCrop(224), float32 0..1, Normalize
Loaders:
  torch+PIL   torch.utils.data.DataLoader over a Dataset that decodes with
              PIL and transforms with PIL (torchvision's PIL-backend ops;
              torchvision has no CPU build here);
  stoker+PIL  stoker.DataLoader over the same Dataset (worker processes);
  vision      stoker.DataLoader over stoker.vision.ImageFolder: decode and
              transforms in C++ reader threads, written into the batch;
  DALI (CPU)  where nvidia-dali-cuda120 is installed: DALI's CPU pipeline
              (device_id=None) with as many threads, torch tensors out;
  FFCV        where ffcv is installed (built from source against Debian's
              libturbojpeg0-dev and libopencv-dev): its Loader over its own
              .beton (the images re-encoded at quality 90, written once),
              one Loader for all rounds, warmed up by an epoch first;
  SPDL        where spdl is installed (with FFmpeg's libraries: Debian's
              libavcodec59 ...): its thread pipeline, FFmpeg decoding and
              filters for the crop, scale and flip.
Each loader runs one epoch per round (rounds interleaved, so drift in the
machine's load hits all alike) and reports images/s and CPU-seconds per
image (the whole process tree: user + system, workers included), both
from the moment the workers have started to the last batch but one (their
time is read from /proc while they live).  Ratios
are against torch+PIL in the same round.  Prints a table and a JSON line.
"""
from __future__ import annotations

import argparse
import io as pyio
import importlib.util
import json
import os
import statistics
import time

import torch

import stoker
from stoker._procfs import cpu_seconds, tree_pids
from stoker.bench.images import MEAN, STD, PILImageFolder, make_images, make_images_from_photos, vision_folder


def tree_cpu() -> dict:
    """pid -> user + system seconds, for this process and its live
    descendants (the loaders' workers), from /proc."""
    out = {pid: cpu_seconds(pid) for pid in tree_pids()}
    return {pid: t for pid, t in out.items() if t is not None}


def cpu_since(before: dict) -> float:
    """CPU seconds the processes alive now used since `before` (a process
    that ended meanwhile, such as an earlier loader's worker, is not this
    epoch's)."""
    return sum(t - before.get(pid, 0.0) for pid, t in tree_cpu().items())


def one_epoch(loader) -> tuple[float, float, int]:
    """(images/s, CPU-s per image, images) of one epoch.  The CPU is read
    before the last batch is taken, while the workers still live (the end of
    an epoch stops them, and a stopped child's time is lost to /proc)."""
    it = iter(loader)
    batches = len(loader)
    c0, t0 = tree_cpu(), time.perf_counter()
    n = 0
    for _ in range(batches - 1):
        n += len(next(it)[1])
    cpu = cpu_since(c0)
    wall = time.perf_counter() - t0
    rest = sum(len(b[1]) for b in it)
    del it
    return n / wall, cpu / n, n + rest


class DaliLoader:
    """NVIDIA DALI on the CPU (device_id=None): its file reader, libjpeg-turbo
    decoding (of the random crop only, for train), resize and
    crop_mirror_normalize, with `workers` threads; batches as torch tensors."""

    def __init__(self, samples, train: bool, workers: int, batch: int):
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
        files, labels = [p for p, _ in samples], [c for _, c in samples]
        self.batches = -(-len(files) // batch)

        @pipeline_def(batch_size=batch, num_threads=workers, device_id=None, seed=0)
        def pipe():
            jpegs, y = fn.readers.file(files=files, labels=labels, random_shuffle=True, name="reader")
            if train:
                img = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                    random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3])
                img = fn.resize(img, resize_x=224, resize_y=224)
                mirror = fn.random.coin_flip()
            else:
                img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
                img = fn.resize(img, resize_shorter=256)
                mirror = 0
            img = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                           mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD], mirror=mirror)
            return img, y

        p = pipe()
        p.build()
        self.it = DALIGenericIterator([p], ["images", "labels"], reader_name="reader",
                                      last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    def __len__(self):
        return self.batches

    def __iter__(self):
        for out in self.it:
            yield out[0]["images"], out[0]["labels"].view(-1)


class SpdlLoader:
    """Meta's SPDL: its thread pipeline (`workers` threads) over
    spdl.io.demux_image + decode_packets with an FFmpeg filter graph doing
    the crop (torchvision's sampling, drawn in Python), the bilinear scale and
    the flip; batches stacked and normalised with torch."""

    def __init__(self, samples, train: bool, workers: int, batch: int):
        import random
        self.samples, self.train, self.workers, self.batch = samples, train, workers, batch
        self.rng = random.Random(0)
        self.mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(STD).view(1, 3, 1, 1) * 255

    def __len__(self):
        return -(-len(self.samples) // self.batch)

    def load(self, i):
        import spdl.io
        from stoker.bench.images import _rrc_params
        path, label = self.samples[i]
        packets = spdl.io.demux_image(path)
        w, h = packets.width, packets.height
        if self.train:
            top, left, ch, cw = _rrc_params(w, h, self.rng)
            flip = ",hflip" if self.rng.random() < 0.5 else ""
            graph = f"crop={cw}:{ch}:{left}:{top},scale=224:224:flags=bilinear{flip},format=rgb24"
        else:
            nw, nh = (256, int(256 * h / w)) if w <= h else (int(256 * w / h), 256)
            left, top = int(round((nw - 224) / 2.0)), int(round((nh - 224) / 2.0))
            graph = f"scale={nw}:{nh}:flags=bilinear,crop=224:224:{left}:{top},format=rgb24"
        frames = spdl.io.decode_packets(packets, filter_desc=graph)
        return spdl.io.to_torch(spdl.io.convert_frames(frames)), label

    def collate(self, items):
        x = torch.stack([t for t, _ in items]).permute(0, 3, 1, 2).float()
        return (x - self.mean) / self.std, torch.tensor([y for _, y in items])

    def __iter__(self):
        from spdl.pipeline import PipelineBuilder
        order = torch.randperm(len(self.samples)).tolist()
        pipeline = (PipelineBuilder().add_source(order).pipe(self.load, concurrency=self.workers)
                    .aggregate(self.batch).pipe(self.collate).add_sink(3).build(num_threads=self.workers))
        with pipeline.auto_stop():
            yield from pipeline.get_iterator(timeout=120)


def ffcv_beton(root: str, samples) -> str:
    """FFCV reads its own format: the images re-encoded as JPEG quality 90
    (its "jpg" mode) into root.beton, written once."""
    path = root.rstrip("/") + ".beton"
    if os.path.exists(path):
        return path
    import numpy as np
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    from PIL import Image

    class Items:
        def __len__(self):
            return len(samples)

        def __getitem__(self, i):
            with Image.open(samples[i][0]) as im:
                return np.asarray(im.convert("RGB")), samples[i][1]

    DatasetWriter(path + ".tmp", {"image": RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()},
                  num_workers=2).from_indexed_dataset(Items())
    os.replace(path + ".tmp", path)
    return path


def ffcv_loader(beton: str, train: bool, workers: int, batch: int):
    """FFCV's Loader on the CPU: its RandomResizedCrop / CenterCrop decoders
    (libjpeg-turbo, then OpenCV's resize), flip and normalise compiled by
    numba, `workers` threads."""
    import numpy as np
    from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
    mean, std = np.array(MEAN) * 255, np.array(STD) * 255
    if train:
        image = [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip()]
    else:
        image = [CenterCropRGBImageDecoder((224, 224), ratio=224 / 256)]
    image += [NormalizeImage(mean, std, np.float32), ToTensor(), ToTorchImage()]
    return Loader(beton, batch_size=batch, num_workers=workers, order=OrderOption.RANDOM, os_cache=True, drop_last=False,
                  pipelines={"image": image, "label": [IntDecoder(), ToTensor(), Squeeze()]})


def loaders(root: str, train: bool, workers: int, batch: int, peers: bool):
    pil = PILImageFolder(root, train)
    native = vision_folder(root, train)
    args = dict(batch_size=batch, shuffle=True, num_workers=workers)
    made = {
        "torch+PIL": lambda: torch.utils.data.DataLoader(pil, **args),
        "stoker+PIL": lambda: stoker.DataLoader(pil, **args),
        "vision": lambda: stoker.DataLoader(native, **args),
    }
    if peers:
        if importlib.util.find_spec("nvidia.dali") is not None:
            made["DALI (CPU)"] = lambda: DaliLoader(pil.samples, train, workers, batch)
        else:
            print("(DALI is not installed: pip install nvidia-dali-cuda120; left out)")
        if importlib.util.find_spec("ffcv") is not None:
            # One Loader for every round, as FFCV is used (a new one compiles
            # its pipeline again), warmed up by one epoch first.
            ffcv = ffcv_loader(ffcv_beton(root, pil.samples), train, workers, batch)
            for _ in ffcv:
                pass
            made["FFCV"] = lambda: ffcv
        else:
            print("(FFCV is not installed: it builds from source against libturbojpeg0-dev and libopencv-dev; "
                  "left out)")
        if importlib.util.find_spec("spdl") is not None:
            made["SPDL"] = lambda: SpdlLoader(pil.samples, train, workers, batch)
        else:
            print("(SPDL is not installed: pip install spdl, with FFmpeg's libraries; left out)")
    return made


def steps(root: str, n: int) -> dict:
    """Per image on one core (process CPU time over n images, page-cached;
    torch on one thread, as in a DataLoader worker): what each part costs."""
    from PIL import Image
    from stoker import vision
    from stoker.bench.images import list_images
    files = [p for p, _ in list_images(root)[:n]]
    data = [open(p, "rb").read() for p in files]
    train, evaluation = vision_folder(root, True), vision_folder(root, False)
    pil_train, pil_eval = PILImageFolder(root, True), PILImageFolder(root, False)

    torch.set_num_threads(1)

    def per_image(fn) -> float:
        fn(0)
        t0 = time.process_time()
        for i in range(n):
            fn(i)
        return (time.process_time() - t0) / n * 1e3

    def pil_decode(i):
        with Image.open(pyio.BytesIO(data[i])) as im:
            im.convert("RGB").load()

    return {
        "PIL decode": per_image(pil_decode),
        "stoker.vision decode_image (whole)": per_image(lambda i: vision.decode_image(data[i])),
        "PIL item, train (read, decode, crop+resize, flip, normalize)": per_image(lambda i: pil_train[i]),
        "stoker.vision item, train (read, partial decode, the rest)": per_image(
            lambda i: train._native.read_with(i, i)),
        "PIL item, eval": per_image(lambda i: pil_eval[i]),
        "stoker.vision item, eval": per_image(lambda i: evaluation._native.read_with(i, i)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="/tmp/stoker-bench-images")
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--pipelines", default="train,eval")
    ap.add_argument("--photos", metavar="DIR",
                    help="make the images from the photographs in DIR (windows of 500x375 at their own scale) "
                         "instead of synthetic ones")
    ap.add_argument("--steps", type=int, default=0, metavar="N",
                    help="instead: the cost of each part per image on one core, over N images")
    ap.add_argument("--no-peers", action="store_true", help="leave out DALI, FFCV and SPDL even where installed")
    args = ap.parse_args()
    if args.photos:
        photos = sorted(os.path.join(args.photos, f) for f in os.listdir(args.photos))
        root = make_images_from_photos(args.root, photos, args.images)
    else:
        root = make_images(args.root, args.images)
    if args.steps:
        for name, ms in steps(root, args.steps).items():
            print(f"{name:<62} {ms:6.2f} ms")
        return
    # Page-cache the files.
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                fh.read()
    result = {"images": args.images, "workers": args.workers, "batch": args.batch, "cpus": os.cpu_count(),
              "torch": torch.__version__, "pipelines": {}}
    for pipe in args.pipelines.split(","):
        made = loaders(root, pipe == "train", args.workers, args.batch, not args.no_peers)
        rows = {name: [] for name in made}
        for _ in range(args.rounds):
            for name, make in made.items():
                rate, cpu, n = one_epoch(make())
                assert n == args.images, (name, n)
                rows[name].append((rate, cpu))
        result["pipelines"][pipe] = rows
        base = [r[0] for r in rows["torch+PIL"]]
        print(f"\n{pipe}: {args.images} JPEGs, batch {args.batch}, {args.workers} workers, {args.rounds} rounds")
        print(f"{'loader':<12} {'images/s (median)':>18} {'vs torch+PIL per round':>28} {'CPU-ms/image':>13}")
        for name, rs in rows.items():
            ratios = [r[0] / b for r, b in zip(rs, base)]
            print(f"{name:<12} {statistics.median(r[0] for r in rs):>18,.0f} "
                  f"{' '.join(f'{x:.2f}x' for x in ratios):>28} {statistics.median(r[1] for r in rs) * 1e3:>13.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
