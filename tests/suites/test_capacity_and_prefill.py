"""Capacity search (closed form with a fake server, then live against the emulator) and prefill profiling."""

import asyncio
import itertools

import orjson
import pytest

from infermeter.client.openai_sse import ClientConfig
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.metrics.slo import parse_capacity_slo
from infermeter.records import RequestRecord, RunInfo, read_records, read_run_info, write_records
from infermeter.suites.capacity import evaluate, search
from infermeter.suites.prefill import profile_prefill
from tests.cli import infermeter
from tests.load.runs import configured
from tests.load.runs import measured as measured_run
from tests.timing import measured


def fake_probe(knee: float, calls: list[float]):
    """A server whose TTFT is 20 ms below the knee and 2 s above it."""

    def run(rate: float, run_dir):
        calls.append(rate)
        ttft = 0.02 if rate <= knee else 2.0
        recs = [
            RequestRecord(
                request_id=i,
                submitted_at=i / rate,
                output_tokens=2,
                max_tokens=2,
                token_times=[i / rate + ttft, i / rate + ttft + 0.01],
            )
            for i in range(50)
        ]
        write_records(run_dir, RunInfo(kind="test"), recs)

    return run


def test_search_brackets_the_knee_within_tolerance_and_resumes(tmp_path):
    calls: list[float] = []
    slos = [parse_capacity_slo("ttft:p99<=100ms")]
    res = search(fake_probe(7.3, calls), slos, tmp_path, start_rate=1, tolerance=0.02, max_probes=20)
    lo, hi = res.bracket
    assert lo <= 7.3 < hi and (hi - lo) / hi <= 0.02
    assert res.capacity_req_s == lo and len(res.probes) <= 10
    # doubling 1, 2, 4, 8 then bisection: every probe is a directory with its run
    assert [p.rate for p in res.probes][:4] == [1, 2, 4, 8]
    again: list[float] = []
    res2 = search(fake_probe(7.3, again), slos, tmp_path, start_rate=1, tolerance=0.02, max_probes=20)
    assert again == [] and res2.capacity_req_s == res.capacity_req_s and all(p.reused for p in res2.probes)
    saved = orjson.loads((tmp_path / "capacity.json").read_bytes())
    assert saved["capacity_req_s"] == res.capacity_req_s


def test_search_when_the_first_probe_fails_shrinks(tmp_path):
    res = search(fake_probe(0.3, []), [parse_capacity_slo("ttft:p99<=100ms")], tmp_path, start_rate=10, tolerance=0.1)
    assert res.bracket[0] <= 0.3 < res.bracket[1]


def test_slo_kinds(tmp_path):
    recs = [
        RequestRecord(
            request_id=i,
            submitted_at=0.0,
            output_tokens=11,
            input_tokens=10,
            token_times=[0.1 + 0.02 * k for k in range(11)],
        )
        for i in range(20)
    ]
    write_records(tmp_path / "r", RunInfo(kind="test"), recs)
    cases = {
        "ttft:p99<=150ms": True,
        "tpot:p50<=10ms": False,
        "fluidity:tbt=25ms,ttft=300ms,share=0.99": True,
        "fluidity:tbt=15ms,share=0.99": False,
        "goodput:ttft=200ms,tpot=30ms,fraction=1.0": True,
        "goodput:ttft=50ms,fraction=0.5": False,
    }
    for text, expect in cases.items():
        _, ok = evaluate(tmp_path / "r", [parse_capacity_slo(text)], 0.99)
        assert ok is expect, text
    with pytest.raises(UserError, match="not understood"):
        parse_capacity_slo("latency<3")


# static batches of 8 on the seed's model, 4x faster: T(8, 64) / 4 = 132 ms a batch, so ~60 req/s of identical
# requests; below that TTFT stays under one batch time plus alpha, above it the queue grows without bound
EMU = EmulatorConfig(speed=4, prefix_caching=False, engine=EngineConfig(scheduler="static_fifo"))
SLO = "ttft:p99<=250ms"


def test_capacity_against_the_emulator_matches_a_manual_sweep(tmp_path):
    """The CLI's search, then manual probes just below and above what it found.  Both judge a P99 of 150 requests,
    so a disturbed machine can flip a probe: such an attempt is measured again (tests/timing.py)."""
    cfg = tmp_path / "emu.json"
    cfg.write_text(EMU.model_dump_json())
    load = ("--input-tokens", "32", "--output-tokens", "32", "--requests", "150", "--arrival", "constant")
    search = ("--start-rate", "16", "--warmup", "10", "--tolerance", "0.05", "--no-progress")
    slo = [parse_capacity_slo(SLO)]
    attempts = iter(range(1, 10))

    def measure():
        k = next(attempts)
        out = tmp_path / f"cap-{k}"
        p = infermeter("capacity", "--slo", SLO, "--emulator-config", cfg, *load, *search, "--out", out, timeout=600)
        assert p.returncode == 0, p.stderr
        result = orjson.loads((out / "capacity.json").read_bytes())
        manual = {}
        cap = result["capacity_req_s"]
        if cap:
            with running_emulator(EMU) as url:
                for factor in (0.9, 1.15):
                    run_dir = tmp_path / f"manual-{k}-{factor}"
                    probe = configured(
                        url,
                        target={"model": "infermeter-emulator"},
                        workload={"input_tokens": 32, "output_tokens": 32},
                        load={"requests": 150, "rate": cap * factor, "arrival": "constant", "warmup": 10},
                        monitors={},
                    )
                    asyncio.run(measured_run(probe, run_dir, url))
                    manual[factor] = evaluate(run_dir, slo, 0.99)
        return p.stdout, result, manual

    def check(got, noise) -> None:
        stdout, result, manual = got
        cap = result["capacity_req_s"]
        probes = [(q["rate"], q["slo_values"]) for q in result["probes"]]
        assert cap and len(result["probes"]) <= 9 and "capacity:" in stdout, probes
        assert 50 <= cap <= 70, probes  # the closed form above
        for factor, expect in ((0.9, True), (1.15, False)):
            summary, ok = manual[factor]
            assert ok is expect, (factor, cap, summary.ttft_ms.p99, probes)

    measured(measure, check)


def test_profile_prefill_recovers_the_emulators_prefill_cost():
    def measure():
        with running_emulator(EmulatorConfig()) as url:
            return asyncio.run(
                profile_prefill(ClientConfig(url, model="infermeter-emulator"), [128, 512, 1024, 2048, 4096], repeats=3)
            )

    def check(curve, noise) -> None:
        assert curve.r2 > 0.99
        # prompts of exactly these lengths under the tokenizer the emulator declares, fitted on its usage counts
        assert (curve.counting_method, curve.tokenizer, curve.lengths) == (
            "A",
            "cl100k_base",
            [128, 512, 1024, 2048, 4096],
        )
        # the emulator's prefill step: 6 ms + (0.045 + 0.00004) ms per prompt token
        assert curve.b * 1000 + curve.c * 1000 * 2048 == pytest.approx(0.04504, rel=0.05)
        assert float(curve.predict(8192)) == pytest.approx(0.006 + 0.04504e-3 * 8192, rel=0.05)

    measured(measure, check)


def test_capacity_replays_a_trace_scaled_to_each_probes_rate(tmp_path):
    """With --trace every probe sends the trace's lengths with its arrival gaps divided by rate / the trace's own
    rate: a trace at 12 / 4.5 s = 2.667 req/s (gaps 0.5, 0.25, 0.5, ...) probed at 8 and 16 req/s."""
    gaps = [0.5, 0.25] * 6
    times = [sum(gaps[:i]) for i in range(13)]  # 13 arrivals over 4.5 s: 12 / 4.5 = 2.667 req/s
    rows = [f"{t:.3f},ChatGPT,{10 + i},{2 + i % 3},0,Conversation log" for i, t in enumerate(times)]
    trace = tmp_path / "trace.csv"
    trace.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "\n".join(rows))
    out = tmp_path / "cap"
    search = ("--start-rate", "8", "--max-rate", "16", "--max-probes", "2", "--warmup", "off", "--no-progress")
    p = infermeter("capacity", "--slo", "ttft:p50<=10s", "--trace", trace, "--requests", "13", *search, "--out", out)
    assert p.returncode == 0, p.stderr
    natural = 12 / 4.5
    for rate in (8, 16):
        run_dir = out / f"probe-rate-{rate}"
        info = read_run_info(run_dir)
        assert info.config["workload"]["rps_scale"] == pytest.approx(rate / natural)
        recs = read_records(run_dir).sort_by("request_id")
        assert recs.column("input_tokens").to_pylist() == [10 + i for i in range(13)]  # the trace's lengths
        sched = recs.column("scheduled_at").to_pylist()
        want = [g * natural / rate for g in gaps]
        assert [b - a for a, b in itertools.pairwise(sched)] == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("backend", ["openai", "grpc"])
def test_profile_prefill_command_on_the_embedded_emulator(tmp_path, backend):
    """Without --url the command profiles the embedded emulator (over either transport) and fits the count the
    emulator declares its own (option A: its tokenizer, named in its settings)."""
    out = tmp_path / "curve.json"
    p = infermeter(
        "profile-prefill",
        "--backend",
        backend,
        "--lengths",
        "64,256,1024",
        "--repeats",
        "1",
        "--decode-tokens",
        "1",
        "--out",
        out,
    )
    assert p.returncode == 0, p.stderr
    curve = orjson.loads(out.read_bytes())
    assert (curve["tokenizer"], curve["counting_method"]) == ("cl100k_base", "A")
