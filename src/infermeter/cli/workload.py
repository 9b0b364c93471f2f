"""`infermeter workload` and `infermeter prompt`: the requests a workload draws, and exact-length prompts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import orjson
import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err, refuse_run_file
from infermeter.errors import UserError
from infermeter.report.tables import grid
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.export import FORMATS, write_requests


@app.command()
def workload(
    name: Annotated[
        str, typer.Argument(help="standard workload name or a YAML/JSON workload file", parser=opt.WORKLOAD)
    ],
    requests: Annotated[
        int, typer.Option("--requests", "-n", help="how many requests to draw", parser=opt.REQUESTS)
    ] = 1000,
    seed: opt.Seed = 42,
    out: Annotated[
        Path, typer.Option(help="output file: .csv, .jsonl or .json (with the declaration)", parser=opt.out_path)
    ] = Path("workload.csv"),
    rate: opt.ArrivalRate = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
) -> None:
    """Write a workload's requests (lengths, classes, prefixes, arrival offsets) to inspect them."""
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file ending in .csv, .jsonl or .json")
    if out.suffix not in FORMATS:
        raise UserError(f"--out {out}: use a file ending in {', '.join(FORMATS)}")
    refuse_run_file(out)
    spec = arrival_spec(arrival, rate, burstiness) if rate is not None else None
    reqs, declaration = build_requests(
        requests, seed, workload=None if trace else name, arrivals=spec, trace=trace, rps_scale=rps_scale
    )
    write_requests(reqs, out, declaration)
    rows = []
    for label, values in (("input tokens", reqs.input_tokens), ("output tokens", reqs.output_tokens)):
        rows.append(
            [
                label,
                f"{values.mean():.1f}",
                f"{np.median(values):.0f}",
                f"{np.percentile(values, 95):.0f}",
                f"{values.min()}",
                f"{values.max()}",
            ]
        )
    print(
        grid(
            ["", "mean", "median", "p95", "min", "max"],
            rows,
            f"{declaration['name']}: {len(reqs)} requests, seed {seed}",
        )
    )
    if declaration["arrivals"]:
        print(f"arrivals: {declaration['arrivals']['description']}, last at {reqs.arrival_s[-1]:.3f} s")
    for note in declaration.get("notes", []):
        print(f"note: {note}")
    print(f"wrote {out}")


@app.command()
def prompt(
    tokenizer: Annotated[
        str,
        typer.Option(help="cl100k_base, o200k_base, a tokenizer.json or a .gguf file", parser=opt.TOKENIZER),
    ],
    tokens: Annotated[int, typer.Option(help="exact token count of the prompt", parser=opt.integer(1, 1_000_000))],
    chat: Annotated[
        bool,
        typer.Option(help="count after the chat template (the tokenizer's own; ChatML for cl100k_base, o200k_base)"),
    ] = False,
    json: Annotated[bool, typer.Option("--json", help='print {"prompt", "tokens", "tokenizer"}')] = False,
    seed: opt.Seed = 0,
) -> None:
    """Build one prompt of exactly N tokens (after the chat template with --chat) and print it."""
    from infermeter.tokenizers import resolve_tokenizer
    from infermeter.workload.prompts import ExactPrompter

    tok = resolve_tokenizer(tokenizer)
    prompter = ExactPrompter(tok, chat=chat, seed=seed)
    content = prompter.build(tokens)
    counted = prompter.count(content)
    if json:
        sys.stdout.write(
            orjson.dumps(
                {
                    "prompt": content,
                    "tokens": counted,
                    "tokenizer": tok.name,
                    "rendered": prompter.render(content) if chat else None,
                }
            ).decode()
            + "\n"
        )
    else:
        print(content)
        err.print(
            f"{counted} tokens under {tok.name}"
            + (f" after the chat template ({prompter.overhead} of them the template's)" if chat else "")
        )
