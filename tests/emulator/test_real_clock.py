"""One engine model, two clocks: the emulator's real-clock engine keeps the simulator's timeline.

Wall-clock tests on a noisy machine: they hold medians and offsets (a drift, a systematic lag), never a maximum or a
P99, and a failure coinciding with a disturbed machine is measured again (tests/timing.py).
"""

import asyncio
import dataclasses
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import uvloop

from infermeter import alarm
from infermeter.client import ClientConfig, OpenAIClient
from infermeter.conduct.run import conduct
from infermeter.config.run import RunConfig
from infermeter.emulator import EmulatorConfig
from infermeter.emulator.declaration import sut_declaration
from infermeter.emulator.engine_loop import RealClockEngine
from infermeter.emulator.process import emulator_process
from infermeter.engine.config import EngineConfig
from infermeter.load import LoadPattern, drive
from infermeter.load.target import Endpoint
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RECORDS, RunClock, read_run_info
from infermeter.sim import simulate, write_sim_run
from infermeter.workload import ArrivalSpec, arrival_offsets
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.distributions import Fixed, Uniform
from infermeter.workload.spec import RequestClass, Requests, WorkloadSpec, generate
from tests.prompts import request
from tests.timing import Noise, measured

ENGINE = EngineConfig.model_validate({"scheduler": {"name": "continuous", "max_num_seqs": 32}})
SHORT = WorkloadSpec(
    name="short", classes=[RequestClass(input=Uniform(min=64, max=256), output=Uniform(min=16, max=112))]
)
SEED = 7


def per_request(times: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    return [times[a:b] for a, b in itertools.pairwise(offsets)]


def simulated_times(reqs: Requests, engine: EngineConfig = ENGINE) -> list[np.ndarray]:
    """Each request's token times on the virtual clock (seconds from the first send)."""
    ragged = simulate(reqs, engine, 1, SEED).emissions.token_times()
    return per_request(ragged.values, ragged.offsets)


async def engine_run(reqs: Requests, kernel_timer: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    """Submit each request straight to the real-clock engine at its arrival offset; returns when each was submitted
    and when each token was handed out, in seconds from the first submission."""
    engine = RealClockEngine(EmulatorConfig(engine=ENGINE, prefix_caching=False))
    engine.start()
    try:
        assert engine._waiter is not None and engine._waiter.kernel_timer == kernel_timer
        t0 = time.perf_counter() + 0.02
        handles = []
        for offset, prompt, out in zip(reqs.arrival_s, reqs.input_tokens, reqs.output_tokens, strict=True):
            await asyncio.sleep(max(t0 + offset - time.perf_counter(), 0))
            handle = engine.submit(int(prompt), int(out))
            assert not isinstance(handle, str), handle
            handles.append(handle)

        async def tokens(handle) -> np.ndarray:
            got = []
            while (t := await handle.queue.get()) is not None:
                got.append(t - t0)
            return np.asarray(got)

        times = await asyncio.gather(*(tokens(h) for h in handles))
    finally:
        await engine.stop()
    # from the first submission, not t0: an event-loop timer may fire up to a millisecond early (libuv keeps its
    # clock in whole milliseconds), and the simulator's clock starts at 0
    first = handles[0].received - t0
    return np.asarray([h.received - t0 - first for h in handles]), [t - first for t in times]


@pytest.mark.parametrize("timer", ["kernel timer", "asyncio timers"])
def test_the_engine_hands_out_tokens_on_the_simulators_timeline(timer, monkeypatch):
    """Requests submitted at Poisson times straight to the engine (no HTTP): every token comes at the time the
    simulator gives it for the same arrivals or just after it, never before (a step starts where the last one
    ended, or when its work arrived, and takes only what had arrived by then); the delay's median is a fraction of
    a millisecond (plus the machine's noise allowance) and does not grow from token to token (a timeline
    restarted whenever the event loop woke up would add every timer's overshoot, step after step).  The same on
    the kernel timer (a timerfd set to each instant, the tokens handed out from its callback) and, where there is
    none, on asyncio's timers."""
    if timer == "asyncio timers":
        monkeypatch.setattr(alarm.Alarm, "open", classmethod(lambda cls, clock, fire: None))
    elif not sys.platform.startswith("linux"):
        pytest.skip("a timerfd is Linux's")
    reqs = generate(SHORT, 60, SEED)
    reqs.arrival_s = arrival_offsets(ArrivalSpec(kind="poisson", rate=20), 60, SEED)

    late: list[float] = []  # how long after its instant each of the engine's timed calls ran
    polls = [0]  # calls made on asyncio's timers
    call_at, loop_timer = alarm.Waiter.call_at, alarm._LoopTimer.__init__

    def watched(self: alarm.Waiter, at: float, fn) -> None:
        def called() -> None:
            late.append(time.perf_counter() - at)
            fn()

        call_at(self, at, called)

    def counted(self: alarm._LoopTimer, at: float, fn) -> None:
        polls[0] += 1
        loop_timer(self, at, fn)

    monkeypatch.setattr(alarm.Waiter, "call_at", watched)
    monkeypatch.setattr(alarm._LoopTimer, "__init__", counted)

    def measure():
        late.clear()
        polls[0] = 0
        return uvloop.run(engine_run(reqs, timer == "kernel timer"))

    def check(result, noise: Noise) -> None:
        submitted, emitted = result
        # the simulator gets the arrivals the engine saw
        sim = simulated_times(dataclasses.replace(reqs, arrival_s=submitted))
        per_request = [(e - s) * 1e3 for e, s in zip(emitted, sim, strict=True)]
        delay = np.concatenate(per_request)
        # how much later each token is than the one before it of the same request: a timeline restarted at every
        # wake-up adds the timer's overshoot each step (~0.4 ms); a host stall past MAX_LAG_S moves the timeline
        # once, which a median of these steps does not see
        growth = float(np.median(np.concatenate([np.diff(d) for d in per_request if len(d) > 1])))
        summary = (
            f"token delay ms: min {delay.min():.4f}, median {np.median(delay):.3f}, median growth per token "
            f"{growth:.4f}; {noise.describe()}"
        )
        assert delay.min() > -1e-3, summary  # never before its time (a microsecond of float rounding)
        assert np.median(delay) < 0.5 + noise.allowance_s * 1e3, summary
        assert abs(growth) < 0.1, summary
        assert late and min(late) > -1e-6, min(late)  # every timed call at or after its instant (ns rounding)
        assert (polls[0] == 0) == (timer == "kernel timer"), polls[0]  # on the timerfd, or else on asyncio's timers

    measured(measure, check)


async def client_run(url: str, reqs: list, offsets: np.ndarray) -> list:
    client = OpenAIClient(ClientConfig(url, model="infermeter-emulator"), RunClock())
    records: list = []
    await drive(client, reqs, LoadPattern(offsets=offsets), records.append)
    await client.close()
    return sorted(records, key=lambda r: r.request_id)


def test_a_clients_token_times_follow_the_simulated_steps_without_drift():
    """Four overlapping 250-token requests through HTTP: each token's client time less the simulator's, both from
    the request's send, has a median of about the API overhead (a millisecond) and stays there from the first
    steps to the last (a drift of a fraction of a millisecond per step would add up to tens of milliseconds)."""
    offsets = np.array([0.0, 0.12, 0.25, 0.4])
    prompts, out = [120, 200, 80, 160], 250
    reqs = [request(i, p, out) for i, p in enumerate(prompts)]

    def measure():
        with emulator_process(EmulatorConfig(engine=ENGINE, prefix_caching=False), pin_cpus=True) as emu:
            return uvloop.run(client_run(emu.url, reqs, offsets))

    def check(records, noise: Noise) -> None:
        assert all(r.status == "ok" and r.output_tokens == out for r in records), [r.error for r in records]
        sim_reqs = Requests(
            np.full(4, "", dtype=object), np.asarray(prompts), np.full(4, out), np.full(4, -1), np.zeros(4, int),
            np.asarray([r.submitted_at - records[0].submitted_at for r in records]),
        )  # fmt: skip
        sim = simulated_times(sim_reqs)
        offset = [
            (np.asarray(r.token_times) - r.submitted_at - (s - sim_reqs.arrival_s[i])) * 1e3
            for i, (r, s) in enumerate(zip(records, sim, strict=True))
        ]
        first = np.median(np.concatenate([o[:60] for o in offset]))
        last = np.median(np.concatenate([o[-60:] for o in offset]))
        drift = np.median([np.median(o[-60:]) - np.median(o[:60]) for o in offset])
        summary = f"client - simulated token time ms: first 60 steps {first:.3f}, last 60 {last:.3f}, drift {drift:.3f}"
        assert -0.5 < first < 3.0, summary
        assert abs(drift) < 0.5, summary

    measured(measure, check)


def run_against(url: str, emu: EmulatorConfig, workload: str, n: int, rate: float, out: Path) -> RecordColumns:
    """`infermeter run` of the workload at `rate` against the emulator at `url`: no warm-up, no monitors."""
    cfg = RunConfig.model_validate({
        "workload": {"workload": workload, "seed": SEED},
        "load": {"requests": n, "rate": rate, "warmup": 0},
        "monitors": {"scrape_interval": 0, "telemetry_interval": 0},
        "emulator": emu.model_dump(),
    }).resolved()  # fmt: skip
    result = uvloop.run(conduct(cfg, Endpoint(url, sut_declaration(emu), url), out, False))
    assert result.stopped is None, result.stopped
    return RecordColumns.of_run(out, read_run_info(out))


def sim_run(engine: EngineConfig, workload: str, n: int, rate: float, out: Path) -> RecordColumns:
    reqs, declaration = build_requests(n, SEED, workload=workload, arrivals=arrival_spec("poisson", rate))
    write_sim_run(simulate(reqs, engine, 1, SEED), out, declaration, SEED, "full")
    return RecordColumns.of_run(out, read_run_info(out))


def first_token_delays(run_dir: Path) -> np.ndarray:
    table = pq.read_table(run_dir / RECORDS, columns=["request_id", "submitted_at", "token_times"])
    rows = table.sort_by("request_id").to_pydict()
    return np.asarray([t[0] - s for s, t in zip(rows["submitted_at"], rows["token_times"], strict=True)])


def test_sim_and_emulator_agree_at_moderate_load(tmp_path):
    """The same workload, seed and Poisson send times (half the model's capacity) simulated and run against the
    emulator: the run sends exactly the simulator's requests at its times, and P50 TTFT and ITL agree within 10%
    once the simulator is given the emulator's HTTP overhead (measured first on sparse requests, the median of the
    emulator's TTFT less the simulator's)."""
    (tmp_path / "w.json").write_text(SHORT.model_dump_json())
    sparse = SHORT.model_copy(update={"classes": [SHORT.classes[0].model_copy(update={"output": Fixed(value=2)})]})
    (tmp_path / "sparse.json").write_text(sparse.model_dump_json())
    workload, n, rate = str(tmp_path / "w.json"), 100, 18.0  # ~36 req/s of capacity, all requests at once
    emu = EmulatorConfig(engine=ENGINE, prefix_caching=False)
    attempt = iter(range(10))

    def measure():
        d = tmp_path / f"attempt-{next(attempt)}"
        with emulator_process(emu, pin_cpus=True) as proc:
            run_against(proc.url, emu, str(tmp_path / "sparse.json"), 20, 10.0, d / "sparse-emu")
            cols = run_against(proc.url, emu, workload, n, rate, d / "emu")
        return d, cols

    def check(result, noise: Noise) -> None:
        d, emu_cols = result
        sim_run(ENGINE, str(tmp_path / "sparse.json"), 20, 10.0, d / "sparse-sim")
        overhead = float(np.median(first_token_delays(d / "sparse-emu") - first_token_delays(d / "sparse-sim")))
        sim_cols = sim_run(ENGINE.model_copy(update={"api_overhead": max(overhead, 0.0)}), workload, n, rate, d / "sim")
        reqs, _ = build_requests(n, SEED, workload=workload, arrivals=arrival_spec("poisson", rate))
        order = np.argsort(emu_cols.request_id)
        assert np.array_equal(emu_cols.input_tokens[order], reqs.input_tokens)
        assert np.array_equal(emu_cols.max_tokens[order], reqs.output_tokens)
        sched = emu_cols.scheduled_at[order]
        assert np.allclose(sched - sched[0], reqs.arrival_s - reqs.arrival_s[0], atol=1e-9)
        sim, real = summarize(sim_cols, "B"), summarize(emu_cols, "B")
        errors = {
            m: getattr(sim, f).percentile(50) / getattr(real, f).percentile(50) - 1
            for m, f in (("TTFT", "ttft_ms"), ("ITL", "itl_ms"))
        }
        summary = f"overhead {overhead * 1e3:.3f} ms; P50 sim/emulator - 1: " + ", ".join(
            f"{m} {e:+.1%}" for m, e in errors.items()
        )
        assert all(abs(e) < 0.10 for e in errors.values()), summary

    measured(measure, check)
