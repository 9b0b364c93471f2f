"""Images and audio a request carries: synthetic ones reproducible from (seed, request id, index), of the size and
format asked for; a folder's files in name order, cycled; a dataset's image column; WAV clips of exact length."""

import base64
import io
import json
import re
import wave
from pathlib import Path

import pytest
from PIL import Image

from infermeter.errors import UserError
from infermeter.workload.datasets import read_dataset
from infermeter.workload.media import (
    MediaMaker,
    MediaSpec,
    data_url_image,
    image_folder,
    synthetic_audio,
    synthetic_image,
)


def decoded(item) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(item.data_b64)))


@pytest.mark.parametrize(("fmt", "pil"), [("png", "PNG"), ("jpeg", "JPEG")])
def test_a_synthetic_image_has_the_size_and_format_asked_for(fmt, pil):
    item = synthetic_image(7, 3, 0, 320, 200, fmt)
    with decoded(item) as im:
        assert (im.format, im.size, im.mode) == (pil, (320, 200), "RGB")
    assert (item.kind, item.mime, item.width, item.height) == ("image", f"image/{fmt}", 320, 200)
    assert item.size_bytes == len(base64.b64decode(item.data_b64))
    assert item.data_url.startswith(f"data:image/{fmt};base64,")


def test_synthetic_images_are_reproducible_and_distinct_per_request_and_index():
    one = synthetic_image(42, 5, 0, 64, 48, "png")
    assert synthetic_image(42, 5, 0, 64, 48, "png").data_b64 == one.data_b64
    others = {synthetic_image(*key, 64, 48, "png").data_b64 for key in [(42, 6, 0), (42, 5, 1), (43, 5, 0)]}
    assert len(others) == 3 and one.data_b64 not in others


def test_a_synthetic_image_compresses_like_a_picture_not_like_noise():
    """Raw RGB is 3 bytes a pixel; noise stays there under PNG, a picture's gradients and flat shapes do not."""
    png = synthetic_image(1, 0, 0, 256, 256, "png")
    jpeg = synthetic_image(1, 0, 0, 256, 256, "jpeg")
    raw = 256 * 256 * 3
    assert png.size_bytes < 0.75 * raw
    assert jpeg.size_bytes < png.size_bytes / 3
    with decoded(png) as im:
        assert len(im.getcolors(maxcolors=256 * 256) or []) > 1000  # not a flat field either


def test_a_wav_clip_is_16_khz_mono_16_bit_of_exactly_its_length():
    item = synthetic_audio(42, 9, 1.5)
    data = base64.b64decode(item.data_b64)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 16000, 24000)
    assert item.size_bytes == len(data) == 44 + 2 * 24000
    assert (item.kind, item.mime, item.format, item.seconds) == ("audio", "audio/wav", "wav", 1.5)
    assert synthetic_audio(42, 9, 1.5).data_b64 == item.data_b64
    assert synthetic_audio(42, 10, 1.5).data_b64 != item.data_b64


def write_image(path: Path | io.BytesIO, size: tuple[int, int], fmt: str) -> None:
    Image.new("RGB", size, (10, 20, 30)).save(path, fmt)


def png_url(size: tuple[int, int]) -> str:
    out = io.BytesIO()
    write_image(out, size, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


PNG_URL = png_url((4, 4))


def test_a_folder_gives_its_images_in_name_order_cycled_over_requests(tmp_path):
    write_image(tmp_path / "b.jpg", (30, 40), "JPEG")
    write_image(tmp_path / "a.png", (10, 20), "PNG")
    write_image(tmp_path / "c.PNG", (50, 60), "PNG")
    (tmp_path / "notes.txt").write_text("not an image")
    files = image_folder(tmp_path)
    assert [(f.path.name, f.mime, f.width, f.height) for f in files] == [
        ("a.png", "image/png", 10, 20),
        ("b.jpg", "image/jpeg", 30, 40),
        ("c.PNG", "image/png", 50, 60),
    ]
    maker = MediaMaker.of(MediaSpec(images=2, image_dir=tmp_path), seed=0)
    sizes = [[(m.width, m.height) for m in maker.items(100 + row, row)] for row in range(3)]
    assert sizes == [[(10, 20), (30, 40)], [(50, 60), (10, 20)], [(30, 40), (50, 60)]]
    assert maker.items(0, 0)[0].data_b64 == base64.b64encode((tmp_path / "a.png").read_bytes()).decode()
    shifted = MediaMaker.of(MediaSpec(images=2, image_dir=tmp_path), seed=0, offset=1)
    assert [(m.width, m.height) for m in shifted.items(0, 0)] == [(50, 60), (10, 20)]


def test_a_folder_without_images_is_a_one_line_error(tmp_path):
    (tmp_path / "readme.md").write_text("x")
    with pytest.raises(UserError, match=re.escape("holds no .png, .jpg or .jpeg file")) as err:
        image_folder(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "fake.png").write_text("not a png")
    with pytest.raises(UserError, match=re.escape("fake.png is not a readable PNG or JPEG image")):
        image_folder(tmp_path)


def test_audio_rides_after_the_images():
    maker = MediaMaker.of(MediaSpec(images=1, width=16, height=16, audio_s=0.25), seed=3)
    kinds = [(m.kind, m.seconds) for m in maker.items(4, 4)]
    assert kinds == [("image", None), ("audio", 0.25)]


def test_a_data_url_image_keeps_its_bytes_and_reads_its_size():
    out = io.BytesIO()
    write_image(out, (7, 9), "PNG")
    payload = base64.b64encode(out.getvalue()).decode()
    item = data_url_image(f"data:image/png;base64,{payload}")
    assert (item.mime, item.width, item.height, item.size_bytes, item.data_b64) == (
        "image/png",
        7,
        9,
        len(out.getvalue()),
        payload,
    )
    with pytest.raises(UserError, match="is not a base64 data: URL"):
        data_url_image("data:image/png,rawbytes")


def test_a_prompt_tables_image_column_is_read_and_sent_with_its_row(tmp_path):
    (tmp_path / "img").mkdir()
    write_image(tmp_path / "img" / "cat.png", (12, 8), "PNG")
    out = io.BytesIO()
    write_image(out, (3, 4), "JPEG")
    url = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()
    rows = [
        {"prompt": "What is in the picture?", "image": "img/cat.png"},
        {"prompt": "And these?", "images": ["img/cat.png", url]},
        {"prompt": "No picture."},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    turns = [s.turns[0] for s in read_dataset(path).sessions]
    assert [t.images for t in turns] == [("img/cat.png",), ("img/cat.png", url), ()]
    maker = MediaMaker.of(MediaSpec(dataset_images=True), seed=0, dataset_dir=tmp_path)
    sent = maker.items(1, 1, turns[1].images)
    assert [(m.mime, m.width, m.height) for m in sent] == [("image/png", 12, 8), ("image/jpeg", 3, 4)]
    path.write_text(json.dumps({"prompt": "x", "image": "img/dog.png"}))
    with pytest.raises(UserError, match=re.escape("row 1: image 'img/dog.png' is not a file")):
        read_dataset(path)


def test_an_image_with_too_many_pixels_is_a_one_line_error_naming_it(tmp_path, monkeypatch):
    """Pillow refuses an image over twice MAX_IMAGE_PIXELS as a decompression bomb (an Exception, not an OSError):
    a folder's file and a data: URL so large are each named in one line, not a traceback."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # a 20x20 image (400 pixels) is over 2 x 100
    write_image(tmp_path / "huge.png", (20, 20), "PNG")
    with pytest.raises(UserError, match=re.escape("huge.png has too many pixels to send")) as err:
        image_folder(tmp_path)
    assert "\n" not in str(err.value)
    url = png_url((20, 20))
    with pytest.raises(UserError, match=re.escape(f"image {url[:40]!r}... has too many pixels to send")) as err:
        data_url_image(url)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        ("data:image/png;base64,not-base64!", "does not hold a PNG or JPEG image"),
        ("data:image/png;base64," + base64.b64encode(b"x" * 64).decode(), "does not hold a PNG or JPEG image"),
        ("data:image/png,rawbytes", "is not a base64 data: URL"),
    ],
)
def test_a_bad_data_url_in_the_image_column_is_refused_when_the_dataset_is_read(tmp_path, cell, why):
    """Found when the rows are read, naming the row, not when the run reaches that row."""
    rows = [{"prompt": "fine", "image": PNG_URL}, {"prompt": "x"}, {"prompt": "y", "images": [PNG_URL, cell]}]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(UserError, match=r"row 3: image 'data:image/png[;,]") as err:
        read_dataset(path)
    assert why in str(err.value) and "\n" not in str(err.value)
