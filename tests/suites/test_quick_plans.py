"""Each suite's procedure at its smallest plan, as a user runs it (`infermeter test NAME --quick` with the suite's own
options set small) against the embedded emulator sped up: the plan's runs (how many, at which loads, in which order)
and the tables read from them, in seconds.  The slow tests of the second tier run the same suites at their quick scale
on the real clock and check what only a long run shows (saturation, preemption, fairness at load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infermeter.records import read_run_info
from infermeter.report.tables import fmt_ms
from infermeter.suite_result import SuiteResult, Table
from infermeter.suites.lab import Run, read_run
from infermeter.suites.registry import get_suite
from tests.cli import suite_result

OFF = ("--warmup", "off")  # a warm-up costs each run more than its own load here


def sped_up(tmp_path: Path, name: str, speed: float, **params: Any) -> str:
    """The emulator the suite `name` configures for itself (with `params`), `speed` times faster: a file for
    --emulator-config."""
    suite = get_suite(name)
    emulator = suite.emulator(suite.params.build(params, True))
    path = tmp_path / f"{name}-emulator.json"
    path.write_text(emulator.model_copy(update={"speed": emulator.speed * speed}).model_dump_json())
    return str(path)


def table(result: SuiteResult, caption: str) -> Table:
    return next(t for t in result.analysis.tables if t.caption.startswith(caption))


def run_of(result: SuiteResult, key: str) -> Run:
    """The suite's run named `key`, read back from its directory."""
    ref = next(r for r in result.runs if r.key == key)
    return read_run(ref.key, ref.label, Path(ref.run_dir), reused=True)


def rate_of(ref: Any) -> float | None:
    """The open-loop rate a run of the suite was sent at, from its run.json."""
    arrivals = read_run_info(Path(ref.run_dir)).load.arrivals
    return None if arrivals is None else arrivals.rate


def test_ttft_closed_loop_is_one_run_at_the_concurrency_given(tmp_path: Path) -> None:
    emu = sped_up(tmp_path, "ttft", 20)
    result = suite_result(
        "ttft", tmp_path / "t", "--concurrency", "3", "--requests", "12", "--emulator-config", emu, *OFF
    )
    assert [r.key for r in result.runs] == ["ttft"]
    run = run_of(result, "ttft")
    assert run.info.load.concurrency == 3
    assert dict(r[:2] for r in table(result, "Table 1").rows)["Requests"] == "12" == str(run.summary.ttft_ms.n)
    f = result.analysis.figures
    assert f["ttft_p50_ms"] == run.summary.ttft_ms.p50 and f["samples"] == 12
    assert "concurrency 3" in result.runs[0].label


def test_throughput_search_probes_upward_from_its_start(tmp_path: Path) -> None:
    emu = sped_up(tmp_path, "throughput", 20)
    args = (
        "--duration",
        "0.4",
        "--start",
        "2",
        "--max-probes",
        "2",
        "--tolerance",
        "0.5",
        "--emulator-config",
        emu,
        *OFF,
    )
    result = suite_result("throughput", tmp_path / "t", *args)
    offered = [rate_of(r) for r in result.runs]
    assert len(result.runs) == 2 and [r.level for r in result.runs] == ["probe 1", "probe 2"]
    assert offered[0] == 2.0 and offered[1] is not None and offered[1] > 2.0
    assert len(table(result, "Search levels").rows) == 2  # one row per probe
    found = result.analysis.figures["sustainable_load"]
    assert found is None or any(found == pytest.approx(o) for o in offered)  # a probe's rate, or none sustained
    summary = ["Table 3: Throughput Summary", "Table 4: Latency at Maximum Throughput"]
    assert [t.caption for t in result.analysis.tables][1:] == ([] if found is None else summary)


def test_itl_probes_the_saturation_then_runs_each_level_as_a_share_of_it(tmp_path: Path) -> None:
    from infermeter.suites.probe import completion_rate

    emu = sped_up(tmp_path, "itl", 20)
    args = ("--levels", "25,50", "--requests", "6", "--emulator-config", emu, *OFF)
    result = suite_result("itl", tmp_path / "i", *args)
    assert [r.key for r in result.runs] == ["probe-capacity", "level-25pct", "level-50pct"]
    probe = run_of(result, "probe-capacity")
    assert probe.info.load.concurrency == 8 and probe.summary.requests.total == 16  # twice the batch of 4, quick
    rate = completion_rate(probe.columns())
    assert rate is not None
    saturation = float(f"{rate:.4g}")
    assert result.analysis.figures["saturation_req_s"] == saturation
    assert [rate_of(r) for r in result.runs[1:]] == [float(f"{saturation * p / 100:.4g}") for p in (25, 50)]
    assert sum(t.caption.startswith("Table 6: ITL Results") for t in result.analysis.tables) == 2
    assert result.analysis.findings[0].startswith(f"saturation {saturation:g} req/s: the capacity of the emulator")


def test_long_context_runs_each_length_at_each_concurrency(tmp_path: Path) -> None:
    emu = sped_up(tmp_path, "long-context", 8)
    args = (
        "--lengths",
        "256,512,1024",
        "--throughput-concurrency",
        "1,2",
        "--requests",
        "1",
        "--output-tokens",
        "4",
        "--emulator-config",
        emu,
    )
    result = suite_result("long-context", tmp_path / "lc", *args)
    lengths = (256, 512, 1024)
    assert [r.key for r in result.runs] == [k for n in lengths for k in (f"length-{n}", f"length-{n}-c2")]
    assert [read_run_info(Path(r.run_dir)).load.concurrency for r in result.runs] == [1, 2] * 3
    rows = table(result, "Table 12").rows
    assert [r[0] for r in rows] == ["256", "512", "1024"]
    for n, row in zip(lengths, rows, strict=True):
        runs = {c: run_of(result, key) for c, key in ((1, f"length-{n}"), (2, f"length-{n}-c2"))}
        assert row[1] == fmt_ms(runs[1].summary.ttft_ms.mean)  # Table 12's TTFT: the concurrency-1 run's
        best = max(runs, key=lambda c: runs[c].summary.throughput.output_tok_s)
        assert row[5] == f"{runs[best].summary.throughput.output_tok_s:.1f} (c={best})"
        assert result.analysis.figures[f"max_output_tok_s_{n}"] == runs[best].summary.throughput.output_tok_s


def test_capacity_then_memory_pressure_from_its_maximum(tmp_path: Path) -> None:
    """A capacity search of two levels, then memory pressure at 100% and 150% of the concurrency it found (--from)."""
    emu = sped_up(tmp_path, "capacity", 20)
    args = (
        "--initial-concurrency",
        "2",
        "--max-concurrency",
        "3",
        "--completions-per-slot",
        "1",
        "--duration",
        "0.2",
        "--input-tokens",
        "64",
        "--output-tokens",
        "8",
        "--emulator-config",
        emu,
        *OFF,
    )
    cap = suite_result("capacity", tmp_path / "cap", *args)
    assert cap.runs[0].key == "concurrency-2"
    rows = table(cap, "Table 7").rows
    assert [int(r[0]) for r in rows] == sorted(int(r.key.split("-")[1]) for r in cap.runs)
    for row in rows:  # every slot completed once, closed loop behind a barrier
        run = run_of(cap, f"concurrency-{row[0]}")
        assert run.info.load.concurrency == int(row[0]) and run.info.load.barrier
        assert run.summary.requests.total >= int(row[0])
    passed = [int(r[0]) for r in rows if r[-1] == "Pass"]
    assert passed, rows  # two or three streams of 8 tokens: far inside the 1 s TTFT P99 bound
    base = cap.analysis.figures["max_concurrency"]
    assert base == max(passed)
    failed = [int(r[0]) for r in rows if r[-1].startswith("Fail")]
    assert cap.analysis.figures["first_failure"] == (min(failed) if failed else None)

    mem_emu = sped_up(tmp_path, "memory-pressure", 20)
    margs = (
        "--from",
        str(tmp_path / "cap"),
        "--levels",
        "100,150",
        "--duration",
        "0.3",
        "--input-tokens",
        "64",
        "--output-tokens",
        "8",
        "--emulator-config",
        mem_emu,
        *OFF,
    )
    mem = suite_result("memory-pressure", tmp_path / "mem", *margs)
    assert mem.analysis.figures["base_concurrency"] == base
    assert mem.analysis.findings[0] == f"base concurrency {base} from the 5.5 test in {tmp_path / 'cap'}"
    assert [r.key for r in mem.runs] == ["oversub-100pct", "oversub-150pct"]
    levels = [max(1, round(base * pct / 100)) for pct in (100, 150)]
    assert [run_of(mem, r.key).info.load.concurrency for r in mem.runs] == levels
    t11 = table(mem, "Table 11: Memory Pressure Degradation").rows
    assert [r[:2] for r in t11] == [["100% (base)", str(levels[0])], ["150%", str(levels[1])]]


def test_fairness_runs_each_class_alone_then_mixed(tmp_path: Path) -> None:
    import numpy as np

    from infermeter.metrics.latency import ttft

    emu = sped_up(tmp_path, "fairness", 50)
    args = (
        "--rate",
        "8",
        "--saturation",
        "10",
        "--requests",
        "10",
        "--duration",
        "0.5",
        "--isolated-requests",
        "4",
        "--emulator-config",
        emu,
        *OFF,
    )
    result = suite_result("fairness", tmp_path / "f", *args)
    assert [r.key for r in result.runs] == ["short-alone", "long-alone", "mix"]
    # each class alone at the mix's total rate; the mix max(10 requests, 0.5 s x 8 req/s), 80% of them short
    assert [rate_of(r) for r in result.runs] == [8.0, 8.0, 8.0]
    assert [r.sent for r in result.runs] == [4, 4, 10]
    table8 = {r[0]: r for r in table(result, "Table 8").rows}
    assert (table8["short"][1], table8["long"][1]) == ("8", "2")
    f = result.analysis.figures
    assert (f["rate_req_s"], f["saturation_req_s"]) == (8.0, 10.0)
    assert result.analysis.findings[0] == "the mix at 8 req/s, 80% of the saturation rate (given (--saturation))"
    mix = run_of(result, "mix").columns()
    for name in ("short", "long"):
        alone = run_of(result, f"{name}-alone").summary.ttft_ms
        mixed = ttft(mix)[mix.request_class == name] * 1000  # ms, as the summary's
        assert f[f"{name}_inflation_p50"] == pytest.approx(float(np.percentile(mixed, 50)) / alone.p50)
    assert f["jain_index"] == run_of(result, "mix").summary.fairness.jain_index


def test_prefix_cache_runs_disabled_cold_warm_and_both_capacities(tmp_path: Path) -> None:
    from infermeter.suites.prefix_cache import LATENCY_SHARE
    from infermeter.suites.probe import completion_rate

    emu = sped_up(tmp_path, "prefix-cache", 20)
    args = ("--requests", "8", "--capacity-requests", "8", "--capacity-concurrency", "4", "--emulator-config", emu)
    result = suite_result("prefix-cache", tmp_path / "p", *args)
    keys = ["capacity-cache-disabled", "cache-disabled", "cache-cold", "cache-warm", "capacity-cache-enabled"]
    assert [r.key for r in result.runs] == keys
    runs = {k: run_of(result, k) for k in keys}
    got = completion_rate(runs["capacity-cache-disabled"].columns())
    assert got is not None
    rate = float(f"{LATENCY_SHARE * got:.4g}")  # the TTFT runs: half what the cache-disabled server completed
    assert [rate_of(r) for r in result.runs] == [None, rate, rate, rate, None]
    assert [runs[k].info.load.concurrency for k in (keys[0], keys[-1])] == [4, 4]
    f = result.analysis.figures
    off = runs["cache-disabled"].summary.ttft_ms.p50
    for name in ("cold", "warm"):
        assert f[f"{name}_ttft_p50_ms"] == runs[f"cache-{name}"].summary.ttft_ms.p50
        assert f[f"{name}_ttft_reduction"] == pytest.approx(1 - f[f"{name}_ttft_p50_ms"] / off)
    assert [r[0] for r in table(result, "Table 10").rows] == ["Cache Disabled", "Cache (Cold)", "Cache (Warm)"]
    on_tput, off_tput = (runs[k].summary.throughput.output_tok_s for k in (keys[-1], keys[0]))
    assert f["throughput_change"] == pytest.approx(on_tput / off_tput - 1)


def test_guardrail_against_servers_searches_and_loads_each_configuration_given(tmp_path: Path) -> None:
    """Two servers (baseline and full filtering: one sped-up emulator, the same server twice here): each
    configuration's capacity search, then its load levels at the baseline's capacity."""
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.emulator.process import emulator_process

    short = tmp_path / "short.json"
    short.write_text(
        '{"name": "short", "classes": [{"input": {"kind": "fixed", "value": 64}, '
        '"output": {"kind": "fixed", "value": 4}}]}'
    )
    with emulator_process(EmulatorConfig(speed=20)) as server:
        args = (
            "--url",
            server.url,
            "--url-baseline",
            server.url,
            "--url-full",
            server.url,
            "--workload",
            str(short),
            "--capacity",
            "20",
            "--levels",
            "50",
            "--duration",
            "0.3",
            "--max-probes",
            "2",
            "--tolerance",
            "0.5",
            "--guardrails",
            "full=Llama Guard 3 on prompts",  # the option repeats, one per configuration
            "--guardrails",
            "baseline=none",
            *OFF,
        )
        result = suite_result("guardrail", tmp_path / "g", *args)
    assert [r.key for r in result.runs] == [
        "baseline-search-r20",
        "baseline-search-r40",
        "baseline-50pct",
        "full-search-r20",
        "full-search-r40",
        "full-50pct",
    ]
    f = result.analysis.figures
    baseline = [run_of(result, k) for k in ("baseline-search-r20", "baseline-search-r40")]
    assert [rate_of(r) for r in result.runs] == [20.0, 40.0, f["capacity_req_s"] / 2] * 2
    assert f["capacity_req_s"] in (20.0, 40.0)  # the baseline's highest sustainable probe
    t13 = table(result, "Table 13: Guardrail Overhead at 50% of capacity").rows
    for row, key in zip(t13, ("baseline-50pct", "full-50pct"), strict=True):
        assert row[1] == fmt_ms(run_of(result, key).summary.ttft_ms.p50)
    t14 = table(result, "Table 14: Throughput Impact").rows
    assert [r[0] for r in t14] == ["Baseline", "Full Filter"]
    assert f["full_throughput_reduction"] == pytest.approx(
        f["full_max_output_tok_s"] / f["baseline_max_output_tok_s"] - 1
    )  # Table 14's "reduction": negative where the filter cut the throughput
    assert baseline[0].info.sut.guardrails == "none"  # as declared, per server
    assert run_of(result, "full-50pct").info.sut.guardrails == "Llama Guard 3 on prompts"
