"""Directories of long jobs (a capacity search, a simulation sweep) that a second start resumes: the job's settings
are kept beside its results, and a start with other settings is refused rather than mixed in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from infermeter.errors import UserError


def claim(out: Path, settings_file: str, settings: dict[str, Any], what: str) -> bool:
    """Make `out` the home of a job with these settings; True when it already was (the job resumes).  Refuses a
    file, and a directory holding the same kind of job with other settings."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file: give a directory for the {what}")
    path = out / settings_file
    wanted = orjson.loads(orjson.dumps(settings))
    if path.is_file():
        try:
            had = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            had = {}
        if had != wanted:
            changed = sorted(k for k in set(wanted) | set(had) if had.get(k) != wanted.get(k))
            raise UserError(
                f"--out {out} holds a {what} made with other settings ({', '.join(changed) or 'unreadable'}): "
                f"choose a new directory, or repeat that {what}'s options to resume it"
            )
        return True
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(wanted, option=orjson.OPT_INDENT_2))
        tmp.replace(path)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write there ({exc.strerror})") from None
    return False
