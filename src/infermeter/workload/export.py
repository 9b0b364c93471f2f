"""Write a generated workload to a file a person can inspect: CSV, JSON Lines, or JSON with its declaration."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import orjson

from infermeter.errors import UserError
from infermeter.workload.spec import Requests

FORMATS = (".csv", ".jsonl", ".json")


def write_requests(requests: Requests, path: Path, declaration: dict[str, Any]) -> None:
    """Write one row per request; the .json form also carries the workload declaration and arrival process."""
    if path.suffix not in FORMATS:
        raise UserError(f"cannot write '{path.name}': use a file ending in {', '.join(FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = requests.rows()
    if path.suffix == ".json":
        path.write_bytes(orjson.dumps({"workload": declaration, "requests": rows}, option=orjson.OPT_INDENT_2))
    elif path.suffix == ".jsonl":
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    else:
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["request_id"])
            writer.writeheader()
            writer.writerows(rows)
