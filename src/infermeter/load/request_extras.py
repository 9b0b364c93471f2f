"""What a run's requests carry beyond their prompt, resolved once from the plan: the texts of an embeddings or rerank
request (--batch-inputs), and the images and audio of a chat or Responses request (--images, --image-dir, a dataset's
image column, --audio); and run.json's account of them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.client.apis import APIS, api_format
from infermeter.client.request import PreparedRequest
from infermeter.errors import UserError
from infermeter.load.media_ahead import MediaAhead, MediaWaits
from infermeter.load.request_inputs import RERANK_QUERY_TOKENS, Batch, batch_for
from infermeter.run_info import RunInfo
from infermeter.workload import ids
from infermeter.workload.media import AUDIO_RATE, ImageFile, MediaMaker, MediaSpec, MediaTally, image_folder
from infermeter.workload.spec import Requests
from infermeter.workload_declaration import MediaDeclaration

if TYPE_CHECKING:
    from infermeter.config.run import RunConfig

AUDIO_FORMAT = f"WAV, {AUDIO_RATE // 1000} kHz mono 16-bit PCM, synthetic (tones over quiet noise, seeded)"
IMAGES_SENT_AS = "images: base64 data: URLs in the request body (chat image_url parts, Responses input_image parts)"
AUDIO_SENT_AS = "audio: base64 WAV data in the request body (chat input_audio parts, format wav)"
SENT_FROM_ONE_PROCESS = (
    "--images, --image-dir, --audio and --batch-inputs are sent from this process only: drop --workers/--cluster"
)


@dataclass
class RequestExtras:
    """A run's batch (embeddings, rerank) and media, with what its measured requests' media held."""

    batch: Batch | None = None
    media: MediaSpec | None = None
    dataset_dir: Path | None = None  # where a dataset's relative image paths start
    folder: tuple[ImageFile, ...] = ()  # --image-dir's files, their headers read before the run
    tally: MediaTally = field(default_factory=MediaTally)
    waits: MediaWaits = field(default_factory=MediaWaits)  # the measured requests' waits for media not made yet
    _open: list[MediaAhead] = field(default_factory=list, repr=False)
    _measured: MediaAhead | None = field(default=None, repr=False)

    def with_media(
        self,
        prompts: Iterable[PreparedRequest],
        requests: Requests,
        seed: int,
        id_base: int = ids.MEASURED,
        offset: int = 0,
    ) -> Iterable[PreparedRequest]:
        """`prompts` (built from `requests`) each given its media as it is taken, drawn from `seed` (`offset`: where
        a folder's cycle starts); the measured run's are tallied for run.json.  Unchanged without media."""
        if self.media is None:
            return prompts
        maker = MediaMaker(self.media, seed, self.folder, offset, self.dataset_dir or Path())
        measured = id_base == ids.MEASURED
        rows = requests.images if self.media.dataset_images else None
        ahead = MediaAhead(
            prompts, maker, id_base, rows, self.tally if measured else None, self.waits if measured else None
        )
        self._open.append(ahead)
        if measured:
            self._measured = ahead
        return ahead

    async def made_ahead(self, stop: asyncio.Event | None = None) -> None:
        """Wait (the event loop free) until the measured requests' media are made as far ahead as memory allows, so
        that the driver does not wait for them once the clock runs.  Nothing to wait for without media."""
        if self._measured is not None:
            await self._measured.filled(stop)
            self.waits.made_ahead = self._measured.made()

    def close(self) -> None:
        """Stop making media (a run that stopped early leaves some made ahead)."""
        for ahead in self._open:
            ahead.close()
        self._open.clear()
        self._measured = None

    def declare(self, info: RunInfo) -> None:
        """run.json's account before the run: the batch size, the rerank query's length, where the media come from."""
        if self.batch is not None:
            if info.client is not None:
                info.client.batch_inputs = self.batch.count
            info.workload.notes.append(self.batch.describe())
            if self.batch.api == "rerank":
                info.workload.rerank_query_tokens = RERANK_QUERY_TOKENS
        if (m := self.media) is not None:
            synthetic = m.images and m.image_dir is None and not m.dataset_images
            info.workload.media = MediaDeclaration(
                images_per_request=None if m.dataset_images else m.images,
                image_source=m.image_source(),
                image_sizes=[f"{m.width}x{m.height}"] if synthetic else [],
                audio_seconds_per_request=m.audio_s or None,
                audio_format=AUDIO_FORMAT if m.audio_s else None,
                sent_as=sent_as(m),
            )

    def declare_sent(self, info: RunInfo, request_ids: Iterable[int]) -> None:
        """run.json's media block completed from the requests sent (the records' ids), and media making stopped."""
        self.close()
        block = info.workload.media
        if block is None:
            return
        sent = self.tally.sent([int(r) for r in request_ids])
        with_media = [c for c in sent if c.images or c.audio]
        total = sum(c.image_bytes + c.audio_bytes for c in with_media)
        sizes = sorted({s for c in sent for s in c.sizes})
        block.image_sizes = [f"{w}x{h}" for w, h in sizes]
        block.images_sent = sum(c.images for c in sent)
        block.image_bytes = sum(c.image_bytes for c in sent)
        block.audio_sent = sum(c.audio for c in sent)
        block.audio_bytes = sum(c.audio_bytes for c in sent)
        block.requests = len(with_media)
        block.bytes_per_request = total / len(with_media) if with_media else None
        waits = self.waits
        block.made_ahead = waits.made_ahead
        block.media_waits = waits.count
        block.media_wait_ms, block.media_wait_max_ms = waits.total_s * 1e3, waits.max_s * 1e3
        if waits.count:
            info.notes.append(
                f"{waits.count} requests' images or audio were not made yet when the load driver took them: the event "
                f"loop waited {block.media_wait_ms:.0f} ms for them in all ({block.media_wait_max_ms:.0f} ms at most), "
                "sends and reads of replies held meanwhile; fewer or smaller images, or a lower rate, avoid it"
            )


def sent_as(media: MediaSpec) -> str:
    """How run.json says each kind the requests carry goes in the body (images and audio go differently)."""
    images = IMAGES_SENT_AS if media.images or media.dataset_images else None
    audio = AUDIO_SENT_AS if media.audio_s else None
    return "; ".join(kind for kind in (images, audio) if kind is not None)


def request_extras(config: RunConfig, has_images_column: bool = False) -> RequestExtras:
    """The extras a resolved configuration asks for (`has_images_column`: the dataset's rows name images), or a
    one-line error: media on an API that takes none (config.run refuses --images and --audio so already), or any of
    them sent from a cluster's workers."""
    target, w = config.target, config.workload
    batch = batch_for(target.api, target.batch_inputs)
    media = None
    images = max(w.images, 1) if w.image_dir is not None else w.images  # a folder alone: one image per request
    if images or w.audio or has_images_column:
        if not api_format(target.api).media:
            takes = ", ".join(name for name in APIS if (fmt := APIS.load(name)) is not None and fmt.media)
            why = "" if images or w.audio else " (the dataset's rows carry images)"
            raise UserError(f"--api {target.api} sends no images or audio{why}: use --api {takes}")
        width, _, height = w.image_size.partition("x")
        media = MediaSpec(
            images=images,
            width=int(width),
            height=int(height),
            image_format=w.image_format,
            image_dir=w.image_dir,
            audio_s=w.audio,
            dataset_images=has_images_column,
        )
    if (batch is not None or media is not None) and config.scale.distributed:
        raise UserError(SENT_FROM_ONE_PROCESS)
    dataset_dir = w.dataset.parent if w.dataset is not None else None
    folder = image_folder(w.image_dir) if media is not None and w.image_dir is not None else ()
    return RequestExtras(batch, media, dataset_dir, folder)
