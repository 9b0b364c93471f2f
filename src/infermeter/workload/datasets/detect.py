"""Which format a dataset is, told from its name and its first row or header, so `--dataset-format` is needed only
where the content does not tell."""

from __future__ import annotations

from infermeter.workload.dataset import FORMATS, DatasetFormat
from infermeter.workload.datasets.source import Source
from infermeter.workload.datasets.tables import csv_header, parquet_columns

JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def detect(source: Source) -> DatasetFormat:
    """The format of `source`; a file that fits none is a UserError naming the formats and --dataset-format."""
    path = source.path
    if path.is_dir():
        return "hf-disk"
    suffix = path.suffix.lower()
    found: DatasetFormat | None = None
    if suffix in JSON_SUFFIXES + JSONL_SUFFIXES:
        found = _json_format(source, suffix)
    elif suffix == ".csv":
        header = set(csv_header(path))
        if "Request tokens" in header:
            found = "burstgpt"
        elif "ContextTokens" in header:
            found = "azure"
        elif "prompt" in header:
            found = "csv"
    elif suffix == ".parquet":
        columns = set(parquet_columns(path))
        if "conversations" in columns:
            found = "sharegpt"
        elif columns & {"prompt", "messages"}:
            found = "parquet"
    if found is None:
        raise source.fail(
            f"is no known dataset format (known: {', '.join(FORMATS)}): a ShareGPT .json of conversations, a "
            ".jsonl/.csv/.parquet with a prompt column, a Mooncake .jsonl (input_length, output_length, hash_ids), "
            "an Azure or BurstGPT .csv, or a save_to_disk directory; give --dataset-format to say which"
        )
    return found


def _json_format(source: Source, suffix: str) -> DatasetFormat | None:
    rows = source.json_rows
    if not rows.items:  # an empty file: read as the name says, to be refused as empty
        return "sharegpt" if suffix in JSON_SUFFIXES else "jsonl"
    first = rows.items[0]
    if not isinstance(first, dict):
        return None
    if suffix in JSON_SUFFIXES and rows.unit == "element":
        if "conversations" in first or "messages" in first:
            return "sharegpt"
        return "jsonl" if "prompt" in first else None
    if "hash_ids" in first or ("input_length" in first and "output_length" in first):
        return "mooncake"
    if "conversations" in first:
        return "sharegpt"
    if "prompt" in first or "messages" in first:
        return "jsonl"
    return None
