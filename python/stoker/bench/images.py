"""The image workload: a folder of JPEGs, the PIL pipeline users have, and
stoker.vision's native one (bench/images.py and `stoker bench`).

The images are made here, deterministic from a seed: 500x375 photographs'
worth of structure (smooth shapes, edges and fine texture) saved as JPEG
quality 90, about 90 KB each, like ImageNet's.  torchvision has no CPU
build here, so the PIL pipeline writes its ops with PIL as torchvision's
PIL backend does (crop, then resize with PIL's antialiased bilinear).
"""
from __future__ import annotations

import math
import os
import random

import numpy as np

NOISE = 28  # texture amplitude: about 90 KB per image at quality 90
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def make_images(root: str, count: int, classes: int = 10, size=(375, 500), seed: int = 0) -> str:
    """Writes `count` JPEGs under root/class_XX/ (once: kept if already there)."""
    from PIL import Image
    stamp = os.path.join(root, f".made-{count}-{classes}-{size[0]}x{size[1]}-{seed}")
    if os.path.exists(stamp):
        return root
    from PIL import ImageDraw
    rng = np.random.default_rng(seed)
    h, w = size
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c:02d}"), exist_ok=True)
    for i in range(count):
        # Smooth colour fields (a coarse grid, upsampled), shapes with hard
        # edges, then fine texture.
        coarse = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        img = Image.fromarray(coarse).resize((w, h), Image.BICUBIC)
        draw = ImageDraw.Draw(img)
        for _ in range(10):
            cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, 120)
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
        px = np.asarray(img).astype(np.int16) + rng.integers(-NOISE, NOISE + 1, (h, w, 3), dtype=np.int16)
        Image.fromarray(np.clip(px, 0, 255).astype(np.uint8)).save(
            os.path.join(root, f"class_{i % classes:02d}", f"img_{i:06d}.jpg"), quality=90)
    open(stamp, "w").close()
    return root


def make_images_from_photos(root: str, photos: list[str], count: int, classes: int = 10,
                            size=(375, 500), seed: int = 0) -> str:
    """Writes `count` JPEGs (quality 90) under root/class_XX/, each a window
    of `size` at a random place in one of `photos` (real photographs, at
    their own scale: a smaller photo is enlarged just enough), mirrored at
    random.  Once: kept if already there."""
    from PIL import Image
    stamp = os.path.join(root, f".made-photos-{count}-{classes}-{size[0]}x{size[1]}-{seed}-{len(photos)}")
    if os.path.exists(stamp):
        return root
    rng = np.random.default_rng(seed)
    h, w = size
    sources = []
    for p in photos:
        im = Image.open(p).convert("RGB")
        k = max(w / im.width, h / im.height, 1.0)
        if k > 1.0:
            im = im.resize((int(np.ceil(im.width * k)), int(np.ceil(im.height * k))), Image.BICUBIC)
        sources.append(im)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c:02d}"), exist_ok=True)
    for i in range(count):
        im = sources[int(rng.integers(len(sources)))]
        top, left = int(rng.integers(im.height - h + 1)), int(rng.integers(im.width - w + 1))
        out = im.crop((left, top, left + w, top + h))
        if rng.random() < 0.5:
            out = out.transpose(Image.FLIP_LEFT_RIGHT)
        out.save(os.path.join(root, f"class_{i % classes:02d}", f"img_{i:06d}.jpg"), quality=90)
    open(stamp, "w").close()
    return root


def list_images(root: str) -> list[tuple[str, int]]:
    """(path, class index) in torchvision's ImageFolder order."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for i, c in enumerate(classes):
        d = os.path.join(root, c)
        out.extend((os.path.join(d, f), i) for f in sorted(os.listdir(d)) if f.endswith(".jpg"))
    return out


def _rrc_params(width: int, height: int, rng: random.Random, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class PILImageFolder:
    """torch Dataset: PIL decode + the train or eval pipeline in __getitem__,
    torchvision's PIL-backend ops written with PIL; items (CHW float32, label)."""

    def __init__(self, root: str, train: bool = True):
        import torch
        self.samples = list_images(root)
        self.train = train
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)
        self.rng = random.Random(0)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        import torch
        from PIL import Image
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        if self.train:
            top, left, h, w = _rrc_params(img.width, img.height, self.rng)
            img = img.crop((left, top, left + w, top + h)).resize((224, 224), Image.BILINEAR)
            if self.rng.random() < 0.5:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
        else:
            w, h = img.size
            nw, nh = (256, int(256 * h / w)) if w <= h else (int(256 * w / h), 256)
            img = img.resize((nw, nh), Image.BILINEAR)
            left, top = int(round((nw - 224) / 2.0)), int(round((nh - 224) / 2.0))
            img = img.crop((left, top, left + 224, top + 224))
        x = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div_(255)
        return (x - self.mean) / self.std, label


def vision_folder(root: str, train: bool = True):
    """The same pipeline in stoker.vision: decoded and transformed natively."""
    from stoker import vision
    geometry = ([vision.RandomResizedCrop(224), vision.RandomHorizontalFlip()] if train
                else [vision.Resize(256), vision.CenterCrop(224)])
    return vision.ImageFolder(root, transform=vision.Compose(
        geometry + [vision.ToDtype("float32", scale=True), vision.Normalize(MEAN, STD)]))
