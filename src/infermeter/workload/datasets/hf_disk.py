"""Hugging Face datasets saved on disk (`Dataset.save_to_disk`: `data-*.arrow` files in Arrow IPC stream format
beside dataset_info.json and state.json; a DatasetDict: a directory per split named in dataset_dict.json).

The .arrow files are read with pyarrow alone: the `datasets` package is not needed (nor installed), and nothing is
downloaded.  Rows with a `conversations` column read as ShareGPT, others as a prompt table."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa

from infermeter.errors import UserError
from infermeter.workload.datasets.prompt_table import table_sessions
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.sharegpt import sharegpt_sessions
from infermeter.workload.datasets.source import Source
from infermeter.workload.datasets.tables import table_rows

SPLIT = "train"  # the split read from a DatasetDict that has it


def read_hf_disk(source: Source, block_tokens: int) -> Read:
    if not source.path.is_dir():
        raise source.fail("is not a directory: a Hugging Face dataset on disk is the directory save_to_disk wrote")
    directory = _split_directory(source.path)
    tables = [_arrow_table(f) for f in _arrow_files(directory)]
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowInvalid as exc:
        raise UserError(f"--dataset {directory}: its .arrow files differ in columns: {exc}") from None
    rows = table_rows(source.path, table)
    if "conversations" in table.column_names:
        return sharegpt_sessions(rows)
    return table_sessions(rows)


def _json(path: Path) -> object:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UserError(f"--dataset {path}: cannot be read as JSON: {exc}") from None


def _split_directory(path: Path) -> Path:
    """The dataset's own directory, or for a DatasetDict its `train` split's (else its only split's)."""
    dict_file = path / "dataset_dict.json"
    if not dict_file.is_file():
        return path
    info = _json(dict_file)
    splits = info.get("splits") if isinstance(info, dict) else None
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits) or not splits:
        raise UserError(f"--dataset {dict_file}: splits is not a list of split names: save the dataset again")
    if SPLIT in splits:
        return path / SPLIT
    if len(splits) == 1:
        return path / splits[0]
    raise UserError(
        f"--dataset {path} holds the splits {', '.join(splits)} and none is named {SPLIT}: give one split's "
        f"directory, e.g. --dataset {path / splits[0]}"
    )


def _arrow_files(directory: Path) -> list[Path]:
    """The split's .arrow files in the order state.json lists them, else by name."""
    state = directory / "state.json"
    if state.is_file():
        info = _json(state)
        listed = info.get("_data_files") if isinstance(info, dict) else None
        if isinstance(listed, list) and listed:
            names = [f.get("filename") if isinstance(f, dict) else None for f in listed]
            if all(isinstance(n, str) for n in names):
                return [directory / str(n) for n in names]
    files = sorted(directory.glob("data-*.arrow")) or sorted(directory.glob("*.arrow"))
    if not files:
        raise UserError(
            f"--dataset {directory} holds no .arrow files: give the directory Dataset.save_to_disk wrote "
            "(data-*.arrow beside dataset_info.json and state.json)"
        )
    return files


def _arrow_table(path: Path) -> pa.Table:
    """One .arrow file: Arrow IPC stream (what save_to_disk writes), else the IPC file format."""
    if not path.is_file():
        raise UserError(f"--dataset {path} does not exist, though state.json lists it: save the dataset again")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"--dataset {path} cannot be read: {exc.strerror or exc}") from None
    try:
        return pa.ipc.open_stream(data).read_all()
    except pa.ArrowInvalid:
        pass
    try:
        return pa.ipc.open_file(data).read_all()
    except pa.ArrowInvalid as exc:
        raise UserError(f"--dataset {path}: not an Arrow IPC file: {str(exc).splitlines()[0]}") from None
