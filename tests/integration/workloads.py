"""Workload files of fixed lengths that the real-server tests send: one length, or a short and a long class."""

from __future__ import annotations

from pathlib import Path


def fixed_workload(directory: Path, prompt: int = 128, output: int = 32) -> Path:
    """A workload file of one class: `prompt` tokens in, `output` out."""
    path = directory / f"fixed-{prompt}-{output}.yaml"
    lengths = f"input: {{kind: fixed, value: {prompt}}}, output: {{kind: fixed, value: {output}}}"
    path.write_text(f"name: fixed\nclasses:\n  - {{{lengths}}}\n")
    return path


def two_lengths(directory: Path, short: int, long: int, output: int) -> Path:
    """A workload file of two classes, `short` and `long` prompts, each replying `output` tokens."""
    path = directory / "two-lengths.yaml"
    path.write_text(
        "name: two-lengths\nclasses:\n"
        f"  - {{name: short, input: {{kind: fixed, value: {short}}}, output: {{kind: fixed, value: {output}}}}}\n"
        f"  - {{name: long, input: {{kind: fixed, value: {long}}}, output: {{kind: fixed, value: {output}}}}}\n"
    )
    return path
