"""Images decoded and augmented in C++: JPEG (libjpeg-turbo) and PNG (libspng).

    from stoker import vision
    train = vision.ImageFolder("/data/imagenet/train", transform=vision.Compose([
        vision.RandomResizedCrop(224), vision.RandomHorizontalFlip(),
        vision.ToDtype("float32", scale=True),
        vision.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))
    loader = stoker.DataLoader(train, batch_size=64, shuffle=True, num_workers=2)

With stoker.DataLoader and the default collate, each item is read, decoded,
transformed and written into the batch by C++ threads that never take the
GIL; `num_workers` counts those threads.  The transforms follow
torchvision.transforms.v2 (names, parameters, semantics; images are CHW);
their random draws come from the loader's generator, per sample, so the same
`generator` gives the same batches whatever the threads do.  Anything else
(torch's DataLoader, a collate_fn, a Python transform) goes through
__getitem__, in worker processes, where random draws come from torch's
generator as torchvision's do.

    decode_image(data) -> numpy uint8 (H, W, 3), without the GIL
    Compose, Resize, CenterCrop, RandomCrop, RandomResizedCrop,
    RandomHorizontalFlip, ToDtype, Normalize
    ImageFolder(root, transform=...)            torchvision's folder layout
    ImageDataset(dataset, image="jpg", ...)     images in a stoker.io / stoker.streaming dataset
"""
from __future__ import annotations

import numbers
import os
from typing import Callable, Sequence

import numpy as np

from stoker import _native  # noqa: F401  (registers torch's and numpy's types first)
from stoker import io as _io

try:
    # The image codecs live in their own module, loaded here and only here:
    # the rest of stoker never maps libjpeg-turbo or libspng.
    from stoker import _stoker_vision as V
except ImportError as _e:
    raise ImportError(
        "stoker.vision needs the module stoker._stoker_vision (JPEG and PNG decoding: libjpeg-turbo and libspng), "
        f"which did not load: {_e}.  This stoker was built without images (-DSTOKER_VISION=OFF) or its install is "
        "broken: reinstall stoker (pip install --force-reinstall stoker); every other part of stoker works without "
        "it") from _e

try:
    import torch
except ImportError:  # pragma: no cover - numpy-only use
    torch = None

__all__ = ["decode_image", "image_size", "Compose", "Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop",
           "RandomHorizontalFlip", "ToDtype", "Normalize", "ImageFolder", "ImageDataset", "IMG_EXTENSIONS",
           "MAX_IMAGE_PIXELS"]

#: Images above this many pixels are refused as decompression bombs (PIL's
#: limit: twice its Image.MAX_IMAGE_PIXELS; the decoder's own constant,
#: kDefaultMaxImagePixels in include/stoker/image.h).
MAX_IMAGE_PIXELS = V.DEFAULT_MAX_IMAGE_PIXELS

#: The extensions ImageFolder lists (the formats stoker.vision decodes).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png")
# What torchvision's ImageFolder lists besides: a folder holding any of these
# is refused (by default), not read with fewer images than torchvision reads.
_TORCHVISION_ONLY = (".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def decode_image(data, max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """Decodes a JPEG or PNG (bytes or any buffer) to RGB: a writable numpy
    uint8 array (H, W, 3), as np.asarray(PIL.Image.open(f).convert("RGB"))
    gives.  Releases the GIL while decoding.  Raises ValueError for a bad,
    truncated or unknown image, or one above `max_pixels`."""
    h, w, rgb = V.decode_image(data, int(max_pixels))
    return np.frombuffer(rgb, dtype=np.uint8).reshape(h, w, 3)


def image_size(data) -> tuple[str, int, int]:
    """(format, height, width) from the header: ("jpeg" | "png", H, W)."""
    return tuple(V.image_info(data))


def _draw() -> int:
    """A sample's random word outside stoker's loader: from torch's generator
    (seeded per worker by any DataLoader), as torchvision draws."""
    if torch is not None:
        return int(torch.randint(0, 2 ** 62, (1,)).item())
    return int(np.random.randint(0, 2 ** 62, dtype=np.int64))


def _pair(size, what: str) -> tuple[int, int]:
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    size = tuple(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) != 2:
        raise ValueError(f"{what}: size must be an int or (height, width), got {size!r}")
    return int(size[0]), int(size[1])


def _dtype_name(dtype) -> str:
    if torch is not None and isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    if dtype == "bfloat16":
        return "bfloat16"
    return np.dtype(dtype).name


def _check_bilinear(interpolation, antialias, what):
    name = getattr(interpolation, "value", interpolation)
    if str(name).lower() not in ("bilinear", "2"):
        raise ValueError(f"{what}: stoker.vision resizes with bilinear interpolation only (got {interpolation!r})")
    if antialias is False:
        raise ValueError(f"{what}: antialias=False is not supported: stoker.vision always antialiases, as "
                         "torchvision does by default")


class _Step:
    """One native step; callable on one image like any Compose."""

    _python = None  # (a step is all native; Compose has its Python part here)

    def _steps(self) -> list[dict]:
        return [self._step]

    def __call__(self, image):
        return Compose([self])(image)

    def __reduce__(self):
        return type(self), self._args

    def __repr__(self):
        return f"stoker.vision.{type(self).__name__}({', '.join(map(repr, self._args))})"


class Resize(_Step):
    """Resize(size, interpolation="bilinear", max_size=None, antialias=True):
    an int resizes the shorter side to `size` (the longer keeps the aspect,
    capped by max_size); (h, w) resizes to that.  Antialiased bilinear, as
    PIL and torchvision compute it."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=True):
        _check_bilinear(interpolation, antialias, "Resize")
        self._args = (size, interpolation, max_size, antialias)
        if isinstance(size, numbers.Integral) or len(tuple(size)) == 1:
            s = int(size) if isinstance(size, numbers.Integral) else int(tuple(size)[0])
            self._step = {"kind": "resize", "size": (s, 0), "max_size": int(max_size or 0)}
        else:
            if max_size is not None:
                raise ValueError("Resize: max_size is only allowed with an int size (as torchvision's)")
            self._step = {"kind": "resize", "size": _pair(size, "Resize")}


class CenterCrop(_Step):
    """CenterCrop(size): the centre (h, w) (an int: square), zero-padded where
    the image is smaller, as torchvision's."""

    def __init__(self, size):
        self._args = (size,)
        self._step = {"kind": "center_crop", "size": _pair(size, "CenterCrop")}


class RandomCrop(_Step):
    """RandomCrop(size, pad_if_needed=False): a (h, w) window at a uniform
    offset; pad_if_needed pads a smaller image with zeros on both sides by
    the shortfall (torchvision's rule).  padding= is not supported."""

    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0, padding_mode: str = "constant"):
        if padding is not None or fill != 0 or padding_mode != "constant":
            raise ValueError("RandomCrop: padding, fill and padding_mode are not supported by stoker.vision "
                             "(pad_if_needed=True pads with zeros)")
        self._args = (size, None, pad_if_needed)
        self._step = {"kind": "random_crop", "size": _pair(size, "RandomCrop"), "pad_if_needed": bool(pad_if_needed)}


class RandomResizedCrop(_Step):
    """RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3/4, 4/3)): a box
    of a random fraction `scale` of the area and log-uniform aspect `ratio`
    (ten tries, then a centre crop, as torchvision samples it), resized to
    `size` with antialiased bilinear."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation="bilinear",
                 antialias=True):
        _check_bilinear(interpolation, antialias, "RandomResizedCrop")
        self._args = (size, tuple(scale), tuple(ratio), interpolation, antialias)
        self._step = {"kind": "random_resized_crop", "size": _pair(size, "RandomResizedCrop"),
                      "scale_range": (float(scale[0]), float(scale[1])), "ratio": (float(ratio[0]), float(ratio[1]))}


class RandomHorizontalFlip(_Step):
    """RandomHorizontalFlip(p=0.5): mirrors the image with probability p."""

    def __init__(self, p: float = 0.5):
        self._args = (p,)
        self._step = {"kind": "hflip", "p": float(p)}


class ToDtype(_Step):
    """ToDtype(dtype, scale=False): "float32" (or torch.float32, ...),
    "float16", "bfloat16", "float64" or "uint8"; scale=True maps 0..255 to
    0..1 for a float dtype."""

    def __init__(self, dtype, scale: bool = False):
        self._args = (dtype, scale)
        self._step = {"kind": "to_dtype", "dtype": _dtype_name(dtype), "scale": bool(scale)}


class Normalize(_Step):
    """Normalize(mean, std): (x - mean[c]) / std[c] per RGB channel, on a
    float image (after ToDtype)."""

    def __init__(self, mean, std, inplace: bool = False):
        mean = [float(v) for v in np.atleast_1d(mean)]
        std = [float(v) for v in np.atleast_1d(std)]
        self._args = (mean, std)
        self._step = {"kind": "normalize", "mean": mean, "std": std}


class Compose:
    """Compose([steps]): the stoker.vision steps run as one native plan (no
    intermediate images); a Python callable among them runs, with what
    follows it, on the CHW tensor the native part made (in worker processes)."""

    def __init__(self, transforms: Sequence):
        self.transforms = list(transforms)
        native: list[dict] = []
        rest: list = []
        for t in self.transforms:
            if not rest and isinstance(t, (_Step, Compose)) and t._python is None:
                native.extend(t._steps())
            elif callable(t):
                rest.append(t)
            else:
                raise TypeError(f"Compose: {t!r} is not a transform")
        self._native_steps = native
        self._pipeline = V.ImagePipeline.make(native) if native else None
        self._python = rest or None

    def _steps(self) -> list[dict]:
        return list(self._native_steps)

    def __call__(self, image):
        """One image: an HWC uint8 numpy array (decode_image's), a PIL image,
        or a CHW uint8 torch tensor.  Returns CHW: a tensor for a tensor,
        else a numpy array."""
        as_tensor = torch is not None and isinstance(image, torch.Tensor)
        out = image
        if self._pipeline is not None:
            hwc = _hwc(image)
            dtype, shape, data = self._pipeline.apply(hwc, hwc.shape[0], hwc.shape[1], _draw())
            out = _array(data, dtype, shape, as_tensor)
        for t in self._python or ():
            out = t(out)
        return out

    def __reduce__(self):
        return Compose, (self.transforms,)

    def __repr__(self):
        return f"stoker.vision.Compose({self.transforms!r})"


def _hwc(image) -> np.ndarray:
    if torch is not None and isinstance(image, torch.Tensor):
        if image.dtype != torch.uint8 or image.dim() != 3 or image.shape[0] not in (1, 3):
            raise ValueError(f"stoker.vision: a tensor image must be uint8 (C, H, W) with C = 1 or 3, got "
                             f"{tuple(image.shape)} {image.dtype}")
        image = image.expand(3, -1, -1).permute(1, 2, 0).numpy()
    elif not isinstance(image, np.ndarray):
        try:  # a PIL image
            image = np.asarray(image.convert("RGB"))
        except AttributeError:
            raise TypeError(f"stoker.vision: cannot transform a {type(image).__name__}; pass a numpy HWC uint8 "
                            "array, a CHW uint8 tensor or a PIL image") from None
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"stoker.vision: a numpy image must be uint8 (H, W, 3), got {image.shape} {image.dtype}")
    return np.ascontiguousarray(image)


def _array(data, dtype: str, shape, as_tensor: bool):
    if dtype == "bfloat16":
        if torch is None:
            raise ValueError("bfloat16 images need torch")
        return torch.frombuffer(bytearray(data), dtype=torch.bfloat16).reshape(shape)
    arr = np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    return torch.from_numpy(arr) if as_tensor else arr


def _split(transform):
    """(native pipeline or None, Python callable or None) of a transform."""
    if transform is None:
        return None, None
    if isinstance(transform, _Step):
        transform = Compose([transform])
    if isinstance(transform, Compose):
        return transform._pipeline, (Compose(transform._python) if transform._python else None)
    if callable(transform):
        return None, transform
    raise TypeError(f"transform must be a stoker.vision transform or a callable, got {transform!r}")


class _ImageBase(_io.NativeDataset):
    """Decoding and transforming an image field of a native dataset."""

    def _open(self, make, transform, on_error: str):
        """make(pipeline) -> the native ImageDataset."""
        _io._check_choice("on_error", on_error, ("raise", "skip"))
        pipeline, self._python = _split(transform)
        self._native = make(pipeline)
        self._image_index = self._native.image_field
        # C++ threads load it when the image has one size and no Python runs.
        self._native_loadable = (self._python is None and pipeline is not None and pipeline.fixed_size is not None
                                 and getattr(self, "_target_transform", None) is None)

    def _sample(self, index: int) -> list:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {self._native.describe()} ({len(self)} samples)")
        parts, (h, w) = self._native.read_with(int(index), _draw())
        fields = self._native.fields
        out = []
        for i, (b, (_name, dtype, shape, variable)) in enumerate(zip(parts, fields)):
            if i == self._image_index:
                img = _array(b, dtype, (3, h, w), torch is not None)
                out.append(self._python(img) if self._python is not None else img)
            else:
                out.append(_io._field_value(b, dtype, shape, variable))
        return out

    def __repr__(self):
        return f"stoker.vision.{type(self).__name__}({self._native.describe()}, {len(self)} samples)"


def find_classes(directory) -> tuple[list[str], dict[str, int]]:
    """torchvision's rule: the sub-directories, sorted, numbered from 0."""
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {c: i for i, c in enumerate(classes)}


class ImageFolder(_ImageBase):
    """ImageFolder(root, transform=None, target_transform=None, *,
    is_valid_file=None, allow_empty=False, max_image_pixels=MAX_IMAGE_PIXELS,
    on_error="raise"): torchvision's layout (root/<class>/**/<image>),
    `classes`, `class_to_idx`, `samples` (path, class index) and `targets`;
    items are (CHW tensor, class index).

    transform: stoker.vision steps run natively; without one an item is the
    decoded uint8 CHW image (each its own size: batch them with a collate_fn
    of yours, or batch_size=None).  A Python callable (or target_transform)
    runs in worker processes on the CHW tensor.  on_error="skip": a bad
    image (truncated, corrupt, not an image, above max_image_pixels) is left
    out of its batch and counted in loader.stats() instead of raising."""

    def __init__(self, root, transform=None, target_transform=None, *, is_valid_file: Callable | None = None,
                 allow_empty: bool = False, max_image_pixels: int = MAX_IMAGE_PIXELS, on_error: str = "raise",
                 _samples=None):
        self.root = os.fspath(root)
        if _samples is None:
            self.classes, self.class_to_idx = find_classes(self.root)
            self.samples = _make_dataset(self.root, self.class_to_idx, is_valid_file, allow_empty)
        else:
            self.classes, self.class_to_idx, self.samples = _samples
        self.targets = [s[1] for s in self.samples]
        self.imgs = self.samples
        self.transform, self._target_transform = transform, target_transform
        self.target_transform = target_transform
        self._args_kw = dict(max_image_pixels=max_image_pixels, on_error=on_error)
        paths = [s[0] for s in self.samples]
        self._open(lambda pipeline: V.ImageDataset.folder(paths, self.targets, pipeline, int(max_image_pixels),
                                                             on_error), transform, on_error)

    def __getitem__(self, index: int):
        img, label = self._sample(index)
        target = int(label)
        if self._target_transform is not None:
            target = self._target_transform(target)
        return img, target

    # Pickled (spawned workers) with its list of files: no second walk of the tree.
    def __reduce__(self):
        return _rebuild_folder, (self.root, self.transform, self._target_transform, self._args_kw,
                                 (self.classes, self.class_to_idx, self.samples))


def _rebuild_folder(root, transform, target_transform, kw, samples):
    return ImageFolder(root, transform, target_transform, _samples=samples, **kw)


def _make_dataset(root: str, class_to_idx: dict, is_valid_file, allow_empty: bool) -> list[tuple[str, int]]:
    undecodable = []  # (by default) images torchvision would list that stoker cannot decode
    if is_valid_file is None:
        def is_valid_file(p):
            low = p.lower()
            if low.endswith(_TORCHVISION_ONLY):
                undecodable.append(p)
            return low.endswith(IMG_EXTENSIONS)
    out = []
    empty = []
    for cls in sorted(class_to_idx):
        target_dir = os.path.join(root, cls)
        n = len(out)
        for dirpath, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(dirpath, fname)
                if is_valid_file(path):
                    out.append((path, class_to_idx[cls]))
        if len(out) == n:
            empty.append(cls)
    if undecodable:
        kinds = sorted({os.path.splitext(p)[1].lower() for p in undecodable})
        shown = ", ".join(undecodable[:3]) + (f" and {len(undecodable) - 3} more" if len(undecodable) > 3 else "")
        raise ValueError(f"ImageFolder({root!r}): {len(undecodable)} file(s) in formats torchvision's ImageFolder "
                         f"reads but stoker.vision does not decode ({', '.join(kinds)}; it decodes "
                         f"{', '.join(IMG_EXTENSIONS)}): {shown}. Convert them to JPEG or PNG, or pass "
                         f"is_valid_file= to choose the files (leaving these out knowingly), or read this folder "
                         f"with torchvision.datasets.ImageFolder.")
    if empty and not allow_empty:
        raise FileNotFoundError(f"Found no valid file for the classes {', '.join(sorted(empty))}. "
                                f"Supported extensions are: {', '.join(IMG_EXTENSIONS)}")
    return out


class ImageDataset(_ImageBase):
    """ImageDataset(dataset, image="jpg", transform=None, *,
    max_image_pixels=MAX_IMAGE_PIXELS, on_error="raise"): the encoded images
    in field `image` of a stoker.io or stoker.streaming dataset (WebDataset tar
    shards' .jpg/.png members, a StreamingDataset's records), decoded and
    transformed.  Items are dicts of the dataset's fields with the image a
    CHW tensor; batches dicts of batched fields.  Declare the image field
    "bytes" (fields={"jpg": "bytes", "cls": "int"}) or let the tar reader
    infer it."""

    def __init__(self, dataset, image: str = "jpg", transform=None, *, max_image_pixels: int = MAX_IMAGE_PIXELS,
                 on_error: str = "raise"):
        if not isinstance(dataset, _io.NativeDataset):
            raise TypeError(f"ImageDataset reads a stoker.io or stoker.streaming dataset, got {type(dataset).__name__}")
        self.dataset, self.image, self.transform = dataset, image, transform
        self._args = (dataset, image, transform)
        self._kw = dict(max_image_pixels=max_image_pixels, on_error=on_error)
        self._open(lambda pipeline: V.ImageDataset(dataset._native, image, pipeline, int(max_image_pixels),
                                                      on_error), transform, on_error)

    def set_epoch(self, epoch: int) -> None:
        self._native.set_epoch(int(epoch))

    def __getitem__(self, index: int):
        parts = self._sample(index)
        return {f[0]: p for f, p in zip(self._native.fields, parts)}

    def __reduce__(self):
        return _rebuild_images, (self._args, self._kw)


def _rebuild_images(args, kw):
    return ImageDataset(*args, **kw)
