"""Images and audio a request carries (--images, --image-dir, a dataset's image column, --audio), made one request at
a time: synthetic pictures drawn with numpy and encoded by Pillow, files read from a folder, synthetic WAV clips.
Each is a `client.media.MediaItem`; the same run seed, request id and index always give the same bytes."""

from __future__ import annotations

import base64
import binascii
import io
import math
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError
from PIL.Image import DecompressionBombError

from infermeter.client.media import IMAGE_SUFFIXES, MediaItem, MediaKind
from infermeter.errors import UserError

ImageFormat = Literal["png", "jpeg"]
IMAGE_STREAM, AUDIO_STREAM = 31, 32  # the random streams media draw from ([seed, stream, request id, index])
MIMES = {"PNG": "image/png", "JPEG": "image/jpeg"}
PNG_LEVEL = 1  # zlib level of synthetic PNGs: level 6 takes ~4x the time (~100 ms per 512x512) for ~12% fewer bytes
JPEG_QUALITY = 85
SHAPES = 6  # rectangles laid over each synthetic image's gradient
NOISE = 2  # synthetic images' grain: each pixel moved by up to this many levels
AUDIO_RATE = 16_000  # Hz: synthetic WAV is 16 kHz mono 16-bit PCM
AUDIO_TONES = 3


@dataclass(frozen=True)
class MediaSpec:
    """What each request carries: `images` images (synthetic WxH in `image_format`, or from `image_dir`, or the
    dataset row's own when `dataset_images`), and `audio_s` seconds of WAV (0: none)."""

    images: int = 0
    width: int = 512
    height: int = 512
    image_format: ImageFormat = "png"
    image_dir: Path | None = None
    audio_s: float = 0.0
    dataset_images: bool = False  # the dataset has an image column: its rows' images are sent

    @property
    def any(self) -> bool:
        return self.images > 0 or self.audio_s > 0 or self.dataset_images

    def image_source(self) -> str | None:
        """How run.json names where the images come from."""
        if self.dataset_images:
            return "the dataset's image column (file paths relative to the dataset, or data: URLs)"
        if self.image_dir is not None:
            return f"folder {self.image_dir} (PNG/JPEG files in name order, cycled over requests)"
        if self.images:
            detail = f"zlib level {PNG_LEVEL}" if self.image_format == "png" else f"quality {JPEG_QUALITY}"
            return (
                f"synthetic {self.width}x{self.height} {self.image_format} ({detail}; a gradient, {SHAPES} "
                f"rectangles and +-{NOISE} levels of grain, seeded by run seed, request id and image index)"
            )
        return None


def encode(
    data: bytes, mime: str, width: int | None = None, height: int | None = None, seconds: float | None = None
) -> MediaItem:
    """A file's bytes as a MediaItem (base64 once, here)."""
    kind: MediaKind = "audio" if mime.startswith("audio/") else "image"
    return MediaItem(kind, mime, base64.b64encode(data).decode("ascii"), len(data), width, height, seconds)


def synthetic_image(seed: int, request_id: int, index: int, width: int, height: int, fmt: ImageFormat) -> MediaItem:
    """A picture-like image: a two-way colour gradient, rectangles of blended colour, and a little grain, so that it
    compresses as a photograph or a screenshot would (pure noise would not).  Drawn as three channel planes and
    merged by Pillow (faster than one interleaved array)."""
    rng = np.random.default_rng([seed, IMAGE_STREAM, request_id, index])
    corners = rng.integers(0, 256, size=(3, 3))  # per channel: the colour at the top left, the right, the bottom
    xs, ys = np.arange(width, dtype=np.int32), np.arange(height, dtype=np.int32)
    boxes = [(*np.sort(rng.integers(0, width + 1, 2)), *np.sort(rng.integers(0, height + 1, 2))) for _ in range(SHAPES)]
    colours = rng.integers(0, 256, size=(SHAPES, 3))
    levels = np.frombuffer(rng.bytes(width * height), dtype=np.uint8).reshape(height, width) % (2 * NOISE + 1)
    grain = levels.astype(np.int16) - NOISE
    planes = []
    for c in range(3):
        top, right, bottom = (int(v) for v in corners[c])
        gx = (top + xs * (right - top) // max(width - 1, 1)).astype(np.int16)
        gy = (ys * (bottom - top) // max(height - 1, 1)).astype(np.int16)
        plane = gy[:, None] + gx[None, :]
        for (x0, x1, y0, y1), colour in zip(boxes, colours, strict=True):
            plane[y0:y1, x0:x1] = (plane[y0:y1, x0:x1] + int(colour[c])) >> 1
        plane += grain
        planes.append(Image.fromarray(np.clip(plane, 0, 255).astype(np.uint8), "L"))
    out = io.BytesIO()
    picture = Image.merge("RGB", planes)
    if fmt == "png":
        picture.save(out, "PNG", compress_level=PNG_LEVEL)
    else:
        picture.save(out, "JPEG", quality=JPEG_QUALITY)
    return encode(out.getvalue(), MIMES[fmt.upper()], width=width, height=height)


def synthetic_audio(seed: int, request_id: int, seconds: float) -> MediaItem:
    """A WAV clip (16 kHz mono 16-bit) of exactly round(seconds * 16000) samples: a few tones that rise and fall,
    over quiet noise."""
    frames = audio_frames(seconds)
    rng = np.random.default_rng([seed, AUDIO_STREAM, request_id])
    t = np.arange(frames, dtype=np.float64) / AUDIO_RATE
    signal = rng.normal(0.0, 0.02, frames)
    for _ in range(AUDIO_TONES):
        freq, rate, phase = rng.uniform(150, 2000), rng.uniform(0.2, 3.0), rng.uniform(0, 2 * math.pi)
        signal += 0.2 * np.sin(2 * math.pi * freq * t + phase) * (0.5 + 0.5 * np.sin(2 * math.pi * rate * t))
    pcm = (np.clip(signal, -1.0, 1.0) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(AUDIO_RATE)
        w.writeframes(pcm.tobytes())
    return encode(out.getvalue(), "audio/wav", seconds=frames / AUDIO_RATE)


def audio_frames(seconds: float) -> int:
    """Samples of a synthetic clip this long (at least one)."""
    return max(1, round(seconds * AUDIO_RATE))


@dataclass(frozen=True)
class ImageFile:
    """An image file sent as it is: its path, format and size in pixels (read from its header)."""

    path: Path
    mime: str
    width: int
    height: int

    def item(self) -> MediaItem:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read image {self.path}: {exc.strerror or exc}") from None
        return encode(data, self.mime, width=self.width, height=self.height)


def image_file(path: Path) -> ImageFile:
    """A PNG or JPEG file's header read (the pixels are not decoded), or a one-line error."""
    try:
        with Image.open(path) as im:
            fmt, (width, height) = im.format, im.size
    except (OSError, UnidentifiedImageError) as exc:
        raise UserError(f"{path} is not a readable PNG or JPEG image: {exc}") from None
    except DecompressionBombError as exc:
        raise UserError(f"{path} has too many pixels to send: {exc}") from None
    if fmt not in MIMES:
        raise UserError(f"{path} is a {fmt} image: give PNG or JPEG files")
    return ImageFile(path, MIMES[fmt], width, height)


def image_folder(folder: Path) -> tuple[ImageFile, ...]:
    """The PNG and JPEG files of a folder in name order (--image-dir)."""
    try:
        names = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    except OSError as exc:
        raise UserError(f"--image-dir {folder}: {exc.strerror or exc}") from None
    if not names:
        raise UserError(f"--image-dir {folder} holds no .png, .jpg or .jpeg file: give a folder of images")
    return tuple(image_file(p) for p in names)


def data_url_image(url: str) -> MediaItem:
    """A `data:image/...;base64,` URL (a dataset's image cell) as a MediaItem, its size read from the header."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise UserError(f"image {url[:40]!r}... is not a base64 data: URL")
    try:
        data = base64.b64decode(payload, validate=True)
        with Image.open(io.BytesIO(data)) as im:
            fmt, (width, height) = im.format, im.size
    except (binascii.Error, OSError, UnidentifiedImageError) as exc:
        raise UserError(f"image {url[:40]!r}... does not hold a PNG or JPEG image: {exc}") from None
    except DecompressionBombError as exc:
        raise UserError(f"image {url[:40]!r}... has too many pixels to send: {exc}") from None
    if fmt not in MIMES:
        raise UserError(f"image {url[:40]!r}... is a {fmt} image: give PNG or JPEG")
    return MediaItem("image", MIMES[fmt], payload, len(data), width=width, height=height)


def dataset_image(cell: str, base: Path) -> MediaItem:
    """One image of a dataset row: a data: URL, or a file path (relative to the dataset's folder)."""
    if cell.startswith("data:"):
        return data_url_image(cell)
    path = Path(cell)
    return image_file(path if path.is_absolute() else base / path).item()


@dataclass
class MediaMaker:
    """The media of each request, made when asked for: `items(request_id, row)` (row: its place in the run's
    requests, which cycles a folder's files; `row_images`: a dataset row's own).  `seed` keys the synthetic ones;
    `offset` shifts where a folder's cycle starts (the warm-up's after the run's)."""

    spec: MediaSpec
    seed: int
    folder: tuple[ImageFile, ...] = ()
    offset: int = 0
    dataset_dir: Path = field(default_factory=Path)

    @classmethod
    def of(cls, spec: MediaSpec, seed: int, offset: int = 0, dataset_dir: Path | None = None) -> MediaMaker:
        folder = image_folder(spec.image_dir) if spec.image_dir is not None and spec.images else ()
        return cls(spec, seed, folder, offset, dataset_dir or Path())

    def items(self, request_id: int, row: int, row_images: tuple[str, ...] = ()) -> tuple[MediaItem, ...]:
        spec, out = self.spec, []
        if row_images:
            out += [dataset_image(cell, self.dataset_dir) for cell in row_images]
        elif self.folder:
            start = (self.offset + row) * spec.images
            out += [self.folder[(start + k) % len(self.folder)].item() for k in range(spec.images)]
        else:
            out += [
                synthetic_image(self.seed, request_id, k, spec.width, spec.height, spec.image_format)
                for k in range(spec.images)
            ]
        if spec.audio_s > 0:
            out.append(synthetic_audio(self.seed, request_id, spec.audio_s))
        return tuple(out)


@dataclass(frozen=True)
class Carried:
    """What one request carried: its images and their bytes and sizes, its audio clips and their bytes."""

    images: int
    image_bytes: int
    sizes: frozenset[tuple[int, int]]
    audio: int
    audio_bytes: int


def carried(items: tuple[MediaItem, ...]) -> Carried:
    images = [m for m in items if m.kind == "image"]
    audio = [m for m in items if m.kind == "audio"]
    return Carried(
        len(images),
        sum(m.size_bytes for m in images),
        frozenset((m.width or 0, m.height or 0) for m in images),
        len(audio),
        sum(m.size_bytes for m in audio),
    )


@dataclass
class MediaTally:
    """What each request carried, noted as its media were made; run.json counts the requests actually sent."""

    by_request: dict[int, Carried] = field(default_factory=dict)

    def add(self, request_id: int, items: tuple[MediaItem, ...]) -> None:
        self.by_request[request_id] = carried(items)

    def sent(self, request_ids: list[int]) -> list[Carried]:
        """What the requests sent carried (one made but never sent is left out)."""
        return [c for rid in request_ids if (c := self.by_request.get(rid)) is not None]
