"""The reader of each dataset format, and the one entry that reads a dataset: detect, read, attach the file's
identity, refuse what holds nothing usable."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infermeter.errors import UserError
from infermeter.workload.dataset import DEFAULT_BLOCK_TOKENS, Dataset, DatasetFormat
from infermeter.workload.datasets.azure import read_azure
from infermeter.workload.datasets.burstgpt import read_burstgpt
from infermeter.workload.datasets.detect import detect
from infermeter.workload.datasets.hf_disk import read_hf_disk
from infermeter.workload.datasets.mooncake import read_mooncake
from infermeter.workload.datasets.prompt_table import read_csv, read_jsonl, read_parquet
from infermeter.workload.datasets.reader import Reader
from infermeter.workload.datasets.sharegpt import read_sharegpt
from infermeter.workload.datasets.source import Source

READERS: dict[DatasetFormat, Reader] = {
    "sharegpt": read_sharegpt,
    "jsonl": read_jsonl,
    "csv": read_csv,
    "parquet": read_parquet,
    "hf-disk": read_hf_disk,
    "mooncake": read_mooncake,
    "azure": read_azure,
    "burstgpt": read_burstgpt,
}


def detect_format(path: Path) -> DatasetFormat:
    """The format of the dataset at `path`, told from its name and first row (a directory: hf-disk)."""
    return detect(Source(path))


def read_dataset(path: Path, fmt: DatasetFormat | None = None, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> Dataset:
    """The dataset at `path` in format `fmt` (None: detected), its sessions in file order (a trace's in time order).

    No tokens are counted here: turns carry their text, and the lengths the file states."""
    if block_tokens < 1:
        raise UserError(f"--block-tokens {block_tokens} is below 1: give the tokens one hash_id stands for")
    source = Source(path)
    with _collector_paused():
        if fmt is None:
            read = READERS[fmt := detect(source)](source, block_tokens)
        else:
            try:
                read = READERS[fmt](source, block_tokens)
            except UserError as exc:  # the content may be another format's
                raise UserError(f"{exc} (read as --dataset-format {fmt})") from None
    if not read.sessions:
        why = "; ".join(f"{count} {reason}" for reason, count in read.dropped.most_common())
        raise source.fail(
            f"holds no usable rows ({read.rows} read{', dropped: ' + why if why else ''}): give a file with at least "
            "one usable row"
        )
    return Dataset(
        path=path,
        format=fmt,
        sha256=source.sha256,
        size_bytes=source.size_bytes,
        sessions=tuple(read.sessions),
        rows=read.rows,
        dropped=dict(read.dropped),
        block_tokens=read.block_tokens,
        timed=all(s.timestamp_s is not None for s in read.sessions),
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading makes millions of objects and no cycles: the cyclic collector, which would walk them all again and
    again, waits till the end (a third of the time a large ShareGPT file takes)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
