"""BurstGPT CSVs (what `--trace` reads): requests of lengths in timestamp order, labelled with their model; failed
requests (0 response tokens) left out, as the dataset's authors do."""

from __future__ import annotations

import numpy as np

from infermeter.errors import UserError
from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.source import Source
from infermeter.workload.datasets.tables import CSV_HEADER_LINES
from infermeter.workload.traces import _columns

FAILED = "failed request (Response tokens 0)"
NO_PROMPT = "no prompt (Request tokens 0)"


def read_burstgpt(source: Source, block_tokens: int) -> Read:
    try:
        c = _columns(source.path)  # the columns --trace reads, parsed once per file
    except UserError as exc:
        raise UserError(f"--dataset {exc}") from None
    read = Read(rows=len(c.timestamps))
    no_prompt, failed = c.inputs == 0, (c.inputs > 0) & (c.outputs == 0)
    for reason, mask in ((NO_PROMPT, no_prompt), (FAILED, failed)):
        if mask.any():
            read.dropped[reason] = int(mask.sum())
    keep = np.flatnonzero(~(no_prompt | failed))
    order = keep[np.argsort(c.timestamps[keep], kind="stable")]
    for i in order.tolist():
        row = i + 1 + CSV_HEADER_LINES
        turn = Turn(None, input_tokens=int(c.inputs[i]), output_tokens=int(c.outputs[i]))
        read.sessions.append(Session(str(row), (turn,), row, float(c.timestamps[i]), label=str(c.models[i])))
    return read
