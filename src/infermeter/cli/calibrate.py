"""`calibrate`: the engine model fitted to a server measured over HTTP (or to a latency grid CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app, emulator_settings, err, refuse_run_file
from infermeter.config.calibration import Calibration
from infermeter.config.section import Given
from infermeter.config.sections import Target, Workload
from infermeter.errors import UserError
from infermeter.event_loop import run_async
from infermeter.report.tables import grid

if TYPE_CHECKING:
    from infermeter.engine.config import EngineConfig

EngineOut = Annotated[
    Path, typer.Option(help="where to write the calibrated engine configuration (YAML)", parser=opt.out_path)
]


def _grid(grid_csv: Path) -> None:
    from infermeter.engine.grid_fit import fit_grid_file

    with about("grid_csv"):
        fit = fit_grid_file(grid_csv)
    m = fit.model
    print(
        grid(
            ["Parameter", "Value"],
            [
                ["alpha", f"{m.alpha * 1000:.3f} ms"],
                ["beta", f"{m.beta * 1000:.4f} ms/token"],
                ["gamma", f"{m.gamma:.4f}"],
                ["R^2", f"{fit.r2:.4f}"],
                ["rows", str(fit.rows)],
                ["max |error|", f"{fit.max_abs_error_s * 1000:.2f} ms"],
            ],
            "Calibrated batch latency model",
        )
    )


CALIBRATE_PARTS = (
    opt.Part("target", Target, only=("url", "api", "backend", "model", "api_key_env", "extra_body", "ignore_eos")),
    opt.Part("workload", Workload, only=("tokenizer",)),
    opt.Part("calibration", Calibration),
)


@app.command()
@opt.built_from(*CALIBRATE_PARTS)
def calibrate(
    given: Given,
    grid_csv: Annotated[
        Path | None,
        typer.Argument(
            help="a latency grid CSV (batch_size, max_seq_len, mean_latency_sec) to fit multi-bin dynamic batching's "
            "T(b, L); without it the server at --url (or the embedded emulator) is probed over HTTP",
            parser=opt.existing_file,
        ),
    ] = None,
    out: EngineOut = Path("engine.yaml"),
    emulator_config: opt.EmulatorConfigFile = None,
) -> None:
    """Fit the engine model to a live server (black box, over its normal API) and write engine.yaml; or fit the
    batch latency model T(b, L) to a latency grid CSV."""
    section = Target.from_options(given.get("target", {}))
    if grid_csv is not None:
        if section.url is not None:
            raise UserError("give either a latency grid CSV or --url, not both")
        _grid(grid_csv)
        return
    from infermeter.engine.config import save_engine_config
    from infermeter.load.target import resolve_target
    from infermeter.python_api.endpoint import serving
    from infermeter.python_api.preflight import api_key
    from infermeter.sim.probe_engine import engine_from_probe
    from infermeter.suites.calibration import FULL, QUICK, probe_server

    tokenizer = Workload.from_options(given.get("workload", {})).tokenizer
    calibration = Calibration.from_options(given.get("calibration", {}))
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file name, e.g. engine.yaml")
    refuse_run_file(out)
    api_key(section.api_key_env)
    plan = QUICK if calibration.quick else FULL
    plan = plan.capped(calibration.max_prompt) if calibration.max_prompt is not None else plan
    emu = None if section.url is not None else emulator_settings(emulator_config, None)
    backend = section.backend
    with serving(section.url, emu, backend, err.print) as endpoint:
        cfg = run_async(resolve_target(section, endpoint)).client
        err.print(f"probing {endpoint.url} (at most {plan.budget_s:.0f} s)")
        probe = run_async(
            probe_server(
                cfg,
                plan,
                backend,
                tokenizer,
                endpoint.sut.get("tokenizer"),
                lambda line: err.print(f"  {line}"),
                endpoint.metrics_url,
            )
        )
    engine = engine_from_probe(probe)
    save_engine_config(engine, out)
    _print_calibration(engine, emu.engine if emu is not None else None)
    print(f"\nwrote {out}: infermeter predict --engine {out} --rate R  (or sim --config / serve --config {out})")


def _print_calibration(engine: EngineConfig, truth: EngineConfig | None) -> None:
    """The fitted model, the policy that explains the isolated prompts, each fit's quality, and what to make of
    them (`truth`: the embedded emulator's own engine, to hold the fit against)."""
    from infermeter.report.calibration import findings, parameter_table, policy_table, quality_table

    cal = engine.calibration
    assert cal is not None
    print(grid(*parameter_table(cal, truth), "Calibrated iteration model"))
    print()
    print(grid(*policy_table(cal), "Which scheduling policy explains the isolated prompts"))
    print()
    print(grid(*quality_table(cal), "How well each fit predicts probes held out of it"))
    print()
    for line in findings(cal, engine):
        print(f"- {line}")
    for note in cal.notes:
        print(f"  note: {note}")
    for line in cal.unseen:
        print(f"- not seen from outside: {line}")
    for line in cal.warnings:
        print(f"warning: {line}")
