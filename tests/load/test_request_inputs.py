"""What a request carries beyond its prompt: embeddings' N inputs and rerank's query and N documents, each of an exact
length under the run's tokenizer (input_tokens their sum); images and audio given lazily as the driver takes each
request, the warm-up's from its own seed; and run.json's account of the media the measured requests sent."""

import asyncio
import itertools
import threading

import numpy as np
import pytest
from PIL import Image

from infermeter.client.media import MediaItem
from infermeter.client.request import PreparedRequest
from infermeter.config.run import RunConfig
from infermeter.config.sections import Scale, Target, Workload
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.errors import UserError
from infermeter.load import media_ahead
from infermeter.load.media_ahead import MediaAhead, MediaWaits
from infermeter.load.prompts import prepared
from infermeter.load.request_extras import RequestExtras, request_extras
from infermeter.load.request_inputs import RERANK_QUERY_TOKENS, Batch, batch_for, sent_texts
from infermeter.records import read_run_info
from infermeter.run_info import Client, RunInfo
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload import ids
from infermeter.workload.build import build_requests
from infermeter.workload.media import MediaMaker, MediaSpec, synthetic_image
from infermeter.workload.prompts import ExactPrompter
from tests.load.runs import configured, measured

TOK = resolve_tokenizer("cl100k_base")


def count(text: str) -> int:
    return len(TOK.encode(text))


def test_embeddings_requests_carry_n_distinct_inputs_each_of_the_drawn_length():
    reqs, _ = build_requests(6, 3, workload="synthetic-uniform")
    prompter = ExactPrompter(TOK, seed=3)
    sent = list(prepared(reqs, 3, prompter=prompter, batch=Batch("embeddings", 4)))
    for req, drawn in zip(sent, reqs.input_tokens, strict=True):
        assert req.inputs is not None and len(req.inputs) == 4
        assert [count(t) for t in req.inputs] == [int(drawn)] * 4
        assert req.prompt == req.inputs[0]
        assert req.input_tokens == req.ref_input_tokens == 4 * int(drawn)
        assert sent_texts(req, Batch("embeddings", 4)) == req.inputs
    every = [t for req in sent for t in req.inputs or ()]
    assert len(set(every)) == len(every) == 24  # no two texts of the run alike
    again = list(prepared(reqs, 3, prompter=prompter, batch=Batch("embeddings", 4)))
    assert [r.inputs for r in again] == [r.inputs for r in sent]


def test_rerank_requests_carry_a_32_token_query_and_n_documents():
    reqs, _ = build_requests(5, 1, input_tokens=200, output_tokens=1)
    sent = list(prepared(reqs, 1, prompter=ExactPrompter(TOK, seed=1), batch=Batch("rerank", 3)))
    for req in sent:
        assert count(req.prompt) == RERANK_QUERY_TOKENS == 32
        assert req.inputs is not None and [count(d) for d in req.inputs] == [200, 200, 200]
        assert req.prompt not in req.inputs
        assert req.input_tokens == 32 + 3 * 200 == 632
        assert req.record(0.0).inputs == 3
        assert sent_texts(req, Batch("rerank", 3)) == (req.prompt, *req.inputs)
    assert len({r.prompt for r in sent}) == 5


def test_documents_after_a_shared_prefix_open_with_it_and_keep_their_length():
    reqs, _ = build_requests(40, 5, workload="conversation")
    sent = list(prepared(reqs, 5, prompter=ExactPrompter(TOK, seed=5), batch=Batch("embeddings", 2)))
    shared = [(r, int(n)) for r, n, pid in zip(sent, reqs.input_tokens, reqs.prefix_id, strict=True) if pid >= 0]
    assert shared
    for req, drawn in shared:
        assert req.inputs is not None
        first, second = req.inputs
        assert [count(first), count(second)] == [drawn, drawn]
        assert first.split()[:10] == second.split()[:10]  # the same shared prefix
        assert first != second


def test_only_embeddings_and_rerank_take_a_batch():
    assert batch_for("embeddings", 8) == Batch("embeddings", 8)
    assert batch_for("rerank", 2) == Batch("rerank", 2)
    assert batch_for("chat", 1) is None


def config(api: str = "chat", **workload) -> RunConfig:
    return RunConfig(target=Target(api=api), workload=Workload(**workload))


def test_media_are_refused_with_an_api_that_sends_none_naming_those_that_do():
    with pytest.raises(UserError, match=r"--api completions sends no images or audio \(the dataset's rows carry") as e:
        request_extras(config("completions"), has_images_column=True)
    assert "use --api chat, responses" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError, match="sent from this process only"):
        request_extras(RunConfig(target=Target(api="chat"), workload=Workload(audio=1.0), scale=Scale(workers=2)))
    extras = request_extras(config("embeddings"))
    assert extras.batch == Batch("embeddings", 1) and extras.media is None


def test_the_configuration_becomes_a_media_spec():
    extras = request_extras(config(images=2, image_size="64x32", image_format="jpeg", audio=0.5))
    assert extras.media == MediaSpec(images=2, width=64, height=32, image_format="jpeg", audio_s=0.5)
    assert extras.batch is None


def test_a_folder_is_read_before_the_run_and_its_sizes_declared(tmp_path):
    with pytest.raises(ValueError, match=r"holds no \.png, \.jpg or \.jpeg file"):  # refused as an option
        config(image_dir=tmp_path)
    Image.new("RGB", (20, 10)).save(tmp_path / "a.png")
    Image.new("RGB", (8, 6)).save(tmp_path / "b.jpeg")
    extras = request_extras(config(image_dir=tmp_path))  # a folder alone: one image a request
    assert extras.media is not None and extras.media.images == 1 and len(extras.folder) == 2
    info = RunInfo(kind="live", client=Client(api="chat", model="m"))
    extras.declare(info)
    reqs, prompts = small_run(3)
    sent = list(extras.with_media(prompts, reqs, 9))
    extras.declare_sent(info, [r.request_id for r in sent])
    block = info.workload.media
    assert block is not None and block.image_source is not None and str(tmp_path) in block.image_source
    assert [m.width for r in sent for m in r.media] == [20, 8, 20]
    assert block.image_sizes == ["8x6", "20x10"] and block.images_sent == 3
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert block.image_bytes == 2 * sizes["a.png"] + sizes["b.jpeg"]


class Counting:
    """A media maker that notes which requests it was asked for."""

    def __init__(self, maker: MediaMaker) -> None:
        self.maker, self.asked = maker, []

    def items(self, request_id, row, row_images=()):
        self.asked.append(request_id)
        return self.maker.items(request_id, row, row_images)


def test_media_are_made_a_few_requests_ahead_never_all_up_front():
    prompts = (PreparedRequest(i, "x", 1, 1) for i in range(10_000))
    maker = Counting(MediaMaker.of(MediaSpec(images=1, width=8, height=8), seed=0))
    ahead = MediaAhead(prompts, maker, ids.MEASURED)  # type: ignore[arg-type]
    taken = list(itertools.islice(ahead, 5))
    ahead.close()
    assert [len(r.media) for r in taken] == [1] * 5
    assert len(maker.asked) <= 5 + media_ahead.AHEAD_MAX


class Sized:
    """A media maker whose every request carries one image of 1000 base64 characters; request `held` waits for
    `release` to be set before it is made."""

    def __init__(self, held: int | None = None) -> None:
        self.asked: list[int] = []
        self.held, self.release = held, threading.Event()

    def items(self, request_id, row, row_images=()):
        self.asked.append(request_id)
        if request_id == self.held:
            self.release.wait(5)
        return (MediaItem("image", "image/png", "A" * 1000, 750, 1, 1),)


def test_media_are_made_as_far_ahead_as_a_bound_in_bytes_allows(monkeypatch):
    """2 started before any size is known, then 10_000 bytes / 1000 a request = 10 made and not yet taken; each
    request taken lets one more be made."""
    monkeypatch.setattr(media_ahead, "AHEAD_FIRST", 2)
    monkeypatch.setattr(media_ahead, "AHEAD_BYTES", 10_000)
    maker, waits = Sized(), MediaWaits()
    ahead = MediaAhead((PreparedRequest(i, "x", 1, 1) for i in range(100)), maker, 0, waits=waits)  # type: ignore[arg-type]
    asyncio.run(ahead.filled())
    assert sorted(maker.asked) == list(range(10)) and ahead.made() == 10
    taken = list(itertools.islice(ahead, 3))
    asyncio.run(ahead.filled())
    ahead.close()
    assert [r.request_id for r in taken] == [0, 1, 2] and sorted(maker.asked) == list(range(13))
    assert waits.count == 0  # every one was made before it was taken


def test_a_request_whose_media_are_not_made_yet_is_waited_for_and_the_wait_counted():
    maker, waits = Sized(held=0), MediaWaits()
    ahead = MediaAhead((PreparedRequest(i, "x", 1, 1) for i in range(4)), maker, 0, waits=waits)  # type: ignore[arg-type]
    threading.Timer(0.05, maker.release.set).start()
    first = next(ahead)
    assert first.request_id == 0 and len(first.media) == 1
    assert waits.count == 1 and waits.total_s == waits.max_s >= 0.04  # released 50 ms after it was asked for
    asyncio.run(ahead.filled())
    assert [r.request_id for r in ahead] == [1, 2, 3] and waits.count == 1  # made by the time they were taken


def test_run_json_counts_the_waits_for_media_and_notes_them():
    extras = RequestExtras(media=MediaSpec(images=1, width=8, height=8))
    info = RunInfo(kind="live", client=Client(api="chat", model="m"))
    extras.declare(info)
    extras.waits.add(0.25)
    extras.waits.add(0.05)
    extras.waits.made_ahead = 7
    extras.declare_sent(info, [])
    block = info.workload.media
    assert block is not None and (block.made_ahead, block.media_waits) == (7, 2)
    assert (block.media_wait_ms, block.media_wait_max_ms) == pytest.approx((300.0, 250.0))
    assert any(n.startswith("2 requests' images or audio were not made yet") and "300 ms" in n for n in info.notes)
    quiet = RequestExtras(media=MediaSpec(images=1, width=8, height=8))
    info = RunInfo(kind="live", client=Client(api="chat", model="m"))
    quiet.declare(info)
    quiet.declare_sent(info, [])
    assert info.notes == [] and info.workload.media is not None and info.workload.media.media_waits == 0


def test_run_json_says_how_each_kind_of_media_is_sent():
    def sent_as(spec: MediaSpec) -> str:
        info = RunInfo(kind="live", client=Client(api="chat", model="m"))
        RequestExtras(media=spec).declare(info)
        assert info.workload.media is not None
        return info.workload.media.sent_as

    images, audio = sent_as(MediaSpec(images=1)), sent_as(MediaSpec(audio_s=1.0))
    assert images.startswith("images: base64 data: URLs") and "audio" not in images
    assert audio.startswith("audio: base64 WAV data") and "input_audio" in audio and "image" not in audio
    assert sent_as(MediaSpec(images=1, audio_s=1.0)) == f"{images}; {audio}"


def small_run(n: int = 6) -> tuple:
    reqs, _ = build_requests(n, 9, input_tokens=40, output_tokens=4)
    return reqs, list(prepared(reqs, 9, prompter=ExactPrompter(TOK, seed=9)))


def test_each_request_gets_its_own_images_and_the_warm_up_others():
    reqs, prompts = small_run()
    extras = RequestExtras(media=MediaSpec(images=2, width=32, height=24))
    sent = list(extras.with_media(prompts, reqs, 9))
    extras.close()
    assert [r.request_id for r in sent] == [p.request_id for p in prompts]
    assert all(len(r.media) == 2 and r.prompt == p.prompt for r, p in zip(sent, prompts, strict=True))
    images = [m.data_b64 for r in sent for m in r.media]
    assert len(set(images)) == 12
    again = list(RequestExtras(media=MediaSpec(images=2, width=32, height=24)).with_media(prompts, reqs, 9))
    assert [m.data_b64 for r in again for m in r.media] == images
    warm = [PreparedRequest(ids.request_id(ids.WARMUP, i), "x", 1, 1) for i in range(6)]
    warm_sent = list(extras.with_media(warm, reqs, 10, ids.WARMUP))
    assert not {m.data_b64 for r in warm_sent for m in r.media} & set(images)
    assert set(extras.tally.by_request) == {p.request_id for p in prompts}  # the warm-up's are not tallied
    assert RequestExtras().with_media(prompts, reqs, 9) is prompts  # nothing to add: unchanged


def test_run_json_declares_what_the_requests_sent_carried():
    reqs, prompts = small_run()
    spec = MediaSpec(images=2, width=32, height=24, image_format="png", audio_s=0.5)
    extras = RequestExtras(media=spec)
    info = RunInfo(kind="live", client=Client(api="chat", model="m"))
    extras.declare(info)
    block = info.workload.media
    assert block is not None and block.images_per_request == 2 and block.audio_seconds_per_request == 0.5
    assert block.image_source is not None and block.image_source.startswith("synthetic 32x24 png")
    built = list(extras.with_media(prompts, reqs, 9))
    sent_ids = [r.request_id for r in built[:4]]  # two were made but never sent
    extras.declare_sent(info, np.asarray(sent_ids))
    images = [m.size_bytes for r in built[:4] for m in r.media if m.kind == "image"]
    audio = [m.size_bytes for r in built[:4] for m in r.media if m.kind == "audio"]
    assert audio == [44 + 2 * 8000] * 4
    assert (block.images_sent, block.image_bytes, block.audio_sent, block.audio_bytes) == (
        8,
        sum(images),
        4,
        4 * 16044,
    )
    assert block.requests == 4 and block.image_sizes == ["32x24"]
    assert block.bytes_per_request == pytest.approx((sum(images) + 4 * 16044) / 4)


def test_run_json_declares_the_batch_and_the_rerank_query():
    info = RunInfo(kind="live", client=Client(api="rerank", model="m"))
    RequestExtras(batch=Batch("rerank", 5)).declare(info)
    assert info.client is not None and info.client.batch_inputs == 5
    assert info.workload.rerank_query_tokens == 32
    assert info.workload.media is None
    assert any("5 document(s) per request" in note for note in info.workload.notes)


def test_a_run_on_the_emulator_declares_the_media_its_requests_sent(tmp_path):
    """6 chat requests with 2 synthetic 64x48 PNGs and 0.25 s of audio each: run.json's media block holds the bytes
    of exactly the images made for request ids 0-5 from the run's seed (42), and 6 clips of 44 + 2 x 4000 bytes."""
    sections = {
        "target": {"api": "chat"},
        "workload": {"input_tokens": 40, "output_tokens": 4, "images": 2, "image_size": "64x48", "audio": 0.25},
        "load": {"requests": 6, "rate": 50.0, "warmup": 2},
    }
    with running_emulator(EmulatorConfig(speed=4)) as url:
        result = asyncio.run(measured(configured(url, **sections), tmp_path / "r", url))
    assert result.summary.requests.ok == 6
    block = read_run_info(result.run_dir).workload.media
    images = sum(synthetic_image(42, rid, k, 64, 48, "png").size_bytes for rid in range(6) for k in range(2))
    assert block is not None
    assert (block.images_per_request, block.image_sizes, block.images_sent, block.image_bytes) == (
        2,
        ["64x48"],
        12,
        images,
    )
    assert (block.audio_seconds_per_request, block.audio_sent, block.audio_bytes) == (0.25, 6, 6 * 8044)
    assert block.requests == 6 and block.bytes_per_request == pytest.approx((images + 6 * 8044) / 6)
    assert block.made_ahead == 6 and block.media_waits == 0  # all made before the clock started: none waited for


def test_the_media_threads_stop_when_a_run_fails_after_its_requests_were_given_media(tmp_path, monkeypatch):
    """The measured requests' media are made ahead on a thread pool; a run that fails after that (here its monitors
    fail to start) still shuts the pool down, so its idle threads end."""

    pool: list[threading.Thread] = []

    async def failing(*args, **kwargs):
        pool.extend(t for t in threading.enumerate() if t.name.startswith("infermeter-media"))
        raise RuntimeError("monitors failed")

    monkeypatch.setattr("infermeter.conduct.run.start_monitors", failing)
    sections = {
        "target": {"api": "chat"},
        "workload": {"input_tokens": 20, "output_tokens": 2, "images": 1, "image_size": "16x16"},
        "load": {"requests": 4, "rate": 50.0, "warmup": 0},
    }
    with running_emulator(EmulatorConfig(speed=4)) as url, pytest.raises(RuntimeError, match="monitors failed"):
        asyncio.run(measured(configured(url, **sections), tmp_path / "r", url))
    assert pool  # the media were being made when the run failed
    for t in pool:
        t.join(2.0)
    assert not [t for t in pool if t.is_alive()]
