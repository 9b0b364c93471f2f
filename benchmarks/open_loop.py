"""Does the open loop keep its schedule, and how exact are its stamps?  `infermeter run` on one core against a server
that streams at known instants on the other.

The server (tests/timed_server.py, pinned to CPU 1) writes a request's first token 5 ms after reading it, then one
every 5 ms, 32 in all, and keeps when it read each request and wrote each token (CLOCK_MONOTONIC), and when the
kernel received the request (its receive timestamp, taken on loopback inside the client's write call: when the request
was on the wire, free of the server's own loop turns).  The run (this process, pinned to CPU 0) is the whole
`infermeter run` path: constant arrivals, records journaled, the summary.  run.json's clock anchor places the run
clock on CLOCK_MONOTONIC; requests are matched to the server's by prompt.

Prints per rate: the rate the server saw over the whole window, the CV of the gaps between the requests' arrivals
(kernel receive times; in brackets the gaps between the server's reads, which add its own loop's jitter) and the
longest, the lateness of the last send (arrival - scheduled), the client's own send delay (submitted_at -
scheduled_at), where the kernel stamped the request after submitted_at ("wire"), the client's TTFT error against
the truth (client TTFT - (first token written - arrival)) and each token's receive lag.
Targets (issue 15): at 1,000 req/s >= 99% of the rate, gap CV < 0.1, last send < 5 ms late, send delay p99 < 5 ms,
TTFT error p99 < 2 ms; at 50-300 req/s TTFT error p50 < 0.5 ms and p99 < 1 ms.

"host CV" is the machine's own figure, measured in the same window: a witness process on CPU 0 beside the client,
at SCHED_FIFO 2 (root; above the client even with --realtime, so the client never delays it),
that does nothing but wake every millisecond (whatever the rate: beside a run at 50 or 300 req/s its CV is the
host's, not a figure to hold the client's against); the CV of the gaps between its wake-ups.  Its gaps over 1.5 ms are
the CPU's stalls (the vCPU taken by the host, an interrupt storm), times when nothing on CPU 0 could run; "off
stalls" is the client's gap CV without the gaps that overlap such a stall or whose requests were due during one (the
catch-up sends right after it), and the share of gaps kept: what the client's own pacing contributes, with what
ordinary tasks on CPU 0 take from it (on this VM a kernel thread of DAMON's memory monitor, ~1 ms every 512 ms, and
the VM's agent: `--realtime` puts the client ahead of them).  The witness costs CPU 0 ~1% (1,000 wake-ups a second).
Without SCHED_FIFO (not root, no CAP_SYS_NICE) there is no witness: those columns print "-" and the rest is measured.

Two columns need no privilege, run.json's client_health for the load's window (Linux): "steal", the CPU time the
hypervisor took from CPU 0 (/proc/stat, in 10 ms ticks: 0 on bare metal), and "wait", the time the client's thread
was runnable but waiting for CPU 0 behind other tasks (schedstat; with a witness, its own ~2% of CPU 0 is in it: it
preempts the client every millisecond).

`--progress` draws the live display on this terminal, as `infermeter run` does by default (run it in a terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository's tests/ package (the timed server)


def start_server(truth: Path, tokens: int, gap: float) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    cmd = [sys.executable, "-m", "tests.timed_server", "--truth", str(truth), "--tokens", str(tokens)]
    cmd += ["--gap", str(gap), "--ttft", str(gap)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            preexec_fn=lambda: os.sched_setaffinity(0, {1}))  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"the timed server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[-1])}"


def run(url: str, rate: float, n: int, tokens: int, out: Path, progress: bool = False, realtime: bool = False) -> None:
    """`infermeter run` in-process (this process is pinned to CPU 0, the loop on this thread), as the command line
    builds it."""
    from infermeter.cli.app import run_async
    from infermeter.conduct.run import conduct
    from infermeter.config.run import RunConfig
    from infermeter.load.target import Endpoint

    cfg = RunConfig.model_validate({
        "target": {"url": url},
        "workload": {"input_tokens": 16, "output_tokens": tokens, "tokenizer": "cl100k_base"},
        "load": {"requests": n, "rate": rate, "arrival": "constant", "warmup": 0, "realtime": realtime},
        "monitors": {"scrape_interval": 0},
    }).resolved()  # fmt: skip
    result = run_async(conduct(cfg, Endpoint(url, {}, url), out, progress))
    if result.stopped:
        raise SystemExit(f"the run stopped: {result.stopped}")


def prompt_keys(n: int, tokens: int) -> np.ndarray:
    """crc32 of each request's prompt, in request-id order (the run's prompts, rebuilt)."""
    from infermeter.load.prompts import prepared
    from infermeter.tokenizers import resolve_tokenizer
    from infermeter.workload.build import build_requests
    from infermeter.workload.prompts import ExactPrompter

    reqs, _ = build_requests(n, 42, input_tokens=16, output_tokens=tokens)
    prompter = ExactPrompter(resolve_tokenizer("cl100k_base"), seed=42)
    return np.array([zlib.crc32(p.prompt.encode()) for p in prepared(reqs, 42, prompter=prompter)], dtype=np.uint32)


WITNESS_PERIOD_S = 0.001
STALL_S = 0.0015  # a witness gap longer than this: the CPU was taken from everything on it
WITNESS_MAX_S = 600.0  # the witness stops by itself after this, should the benchmark die without stopping it


def witness(out: str) -> None:
    """The witness's process: wake every WITNESS_PERIOD_S on CPU 0 until SIGTERM, then save the wake-up instants
    (CLOCK_MONOTONIC seconds) to `out`.  At SCHED_FIFO, so the client on the same CPU never delays it (it says
    which class it got; `start_witness` does without an ordinary one)."""
    from infermeter.process_limits import REALTIME_PRIORITY

    os.sched_setaffinity(0, {0})
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY + 1))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    woke = np.empty(int(WITNESS_MAX_S / WITNESS_PERIOD_S))
    start, k = time.monotonic(), 0
    print("ready", "real-time" if os.sched_getscheduler(0) == os.SCHED_FIFO else "ordinary", flush=True)
    while not stop and k < len(woke):
        delay = start + (k + 1) * WITNESS_PERIOD_S - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        woke[k] = time.monotonic()
        k += 1
    np.save(out, woke[:k])


def start_witness(out: Path) -> subprocess.Popen[str] | None:
    """The witness, dying with this process and deaf to a terminal's Ctrl-C (the run stops and it saves first).
    None unless at SCHED_FIFO: an ordinary one would wait behind the client and count the client's own stalls."""
    from infermeter.emulator.process import die_with_parent

    cmd = [sys.executable, __file__, "--witness", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line != ["ready", "real-time"]:
        proc.kill()
        proc.wait()
        return None
    return proc


def stall_spans(woke: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the witness was kept from waking for over STALL_S: the (start, end) of each such gap, in order."""
    long = np.flatnonzero(np.diff(woke) > STALL_S)
    return woke[long], woke[long + 1]


def off_stalls(arrivals: np.ndarray, due: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which gaps between consecutive arrivals (sorted; `due` their requests' scheduled instants on the same clock)
    neither overlap a stall nor belong to a request due during one."""
    if not len(starts):
        return np.ones(len(arrivals) - 1, dtype=bool)
    j = np.searchsorted(starts, arrivals[1:]) - 1  # the last stall to start before the gap's end
    spans = (j >= 0) & (ends[np.maximum(j, 0)] > arrivals[:-1])
    k = np.searchsorted(starts, due, side="right") - 1
    due_in = (k >= 0) & (due <= ends[np.maximum(k, 0)])
    return ~spans & ~due_in[:-1] & ~due_in[1:]


def pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q))


def measure(
    rate: float, seconds: float, tokens: int, gap: float, progress: bool = False, realtime: bool = False
) -> dict[str, float]:
    from infermeter.records import RECORDS, read_run_info

    n = int(rate * seconds)
    with tempfile.TemporaryDirectory() as tmp:
        truth_file, out, woke_file = Path(tmp) / "truth.npz", Path(tmp) / "run", Path(tmp) / "woke.npy"
        started: list[subprocess.Popen[str]] = []
        try:
            watch = start_witness(woke_file)
            started += [watch] if watch is not None else []
            server, url = start_server(truth_file, tokens, gap)
            started.append(server)
            run(url, rate, n, tokens, out, progress, realtime)
        finally:
            for proc in reversed(started):
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        truth = dict(np.load(truth_file))
        woke = np.load(woke_file) if watch is not None else None
        if os.environ.get("KEEP_TRUTH"):
            np.savez(os.environ["KEEP_TRUTH"], **truth)
        info = read_run_info(out)
        cols = ["request_id", "scheduled_at", "submitted_at", "token_times", "status"]
        table = pq.read_table(out / RECORDS, columns=cols).sort_by("request_id")
    assert info.clock_anchor is not None, "run.json has no clock anchor"
    health = info.client_health
    assert health is not None and health.cpu_wait_ms is not None and health.steal_ms is not None, "not on Linux"
    origin = info.clock_anchor.monotonic_ns / 1e9
    keys = prompt_keys(n, tokens)
    ids = table["request_id"].to_numpy() - int(table["request_id"][0].as_py())
    where = {int(k): i for i, k in enumerate(truth["key"])}
    row = np.array([where.get(int(keys[i]), -1) for i in ids])
    ok = (row >= 0) & (np.asarray(table["status"].to_pylist()) == "ok")
    sched = table["scheduled_at"].to_numpy()
    sub = table["submitted_at"].to_numpy()
    times = table["token_times"].to_pylist()
    first = np.array([t[0] if t else np.nan for t in times])
    read = truth["read_at"] - origin  # on the run clock
    wire = truth["wire_at"] - origin
    writes = truth["writes"] - origin
    arrivals = np.sort(wire)
    gaps = np.diff(arrivals)
    read_gaps = np.diff(np.sort(read))
    r = row[ok]
    order = np.argsort(wire[r])
    mine, due = wire[r][order], sched[ok][order]
    host: dict[str, float] = {}
    if woke is not None:
        starts, ends = stall_spans(woke - origin)
        keep = off_stalls(mine, due, starts, ends)
        mine_gaps = np.diff(mine)[keep]
        host_gaps = np.diff(woke[(woke >= arrivals[0] + origin) & (woke <= arrivals[-1] + origin)])
        host = {
            "host_cv": float(np.std(host_gaps) / np.mean(host_gaps)),
            "stalls": len(starts[(starts >= arrivals[0]) & (starts <= arrivals[-1])]),
            "off_stall_cv": float(np.std(mine_gaps) / np.mean(mine_gaps)),
            "off_stall_share": len(mine_gaps) / max(len(mine) - 1, 1),
        }
    ttft_err = (first[ok] - sub[ok]) - (writes[r, 0] - wire[r])
    lag = np.concatenate([np.asarray(times[i]) - writes[row[i], : len(times[i])] for i in np.flatnonzero(ok)])
    last = int(np.argmax(np.where(ok, sched, -np.inf)))
    return {
        "rate": rate,
        "requests": n,
        "matched": int(ok.sum()),
        "server_rate_pct": 100 * (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) / rate,
        "gap_cv": float(np.std(gaps) / np.mean(gaps)),
        "read_gap_cv": float(np.std(read_gaps) / np.mean(read_gaps)),
        **host,
        "refused": float(realtime and (info.client is None or info.client.scheduling is None)),
        "steal_ms": health.steal_ms,
        "wait_ms": health.cpu_wait_ms,
        "gap_max_ms": float(gaps.max() * 1e3),
        "last_late_ms": float((wire[row[last]] - sched[last]) * 1e3),
        "send_p50_ms": pct(sub - sched, 50) * 1e3,
        "send_p99_ms": pct(sub - sched, 99) * 1e3,
        "wire_p50_ms": pct(wire[r] - sub[ok], 50) * 1e3,
        "ttft_err_p50_ms": pct(ttft_err, 50) * 1e3,
        "ttft_err_p99_ms": pct(ttft_err, 99) * 1e3,
        "lag_p50_ms": pct(lag, 50) * 1e3,
        "lag_p99_ms": pct(lag, 99) * 1e3,
        "server_late_p99_ms": pct(truth["late"], 99) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="50,300,1000", help="comma-separated req/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each run's schedule")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--gap", type=float, default=0.005, help="seconds between a stream's tokens")
    parser.add_argument("--progress", action="store_true", help="draw the live display, as `infermeter run` does")
    parser.add_argument("--realtime", action="store_true", help="`infermeter run --realtime`: send at SCHED_FIFO")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    print(
        f"open loop, constant arrivals, {args.tokens} tokens {args.gap * 1e3:g} ms apart; client CPU 0"
        f"{' at SCHED_FIFO (--realtime)' if args.realtime else ''}, server CPU 1"
    )
    head = "  rate  server%  gapCV (read)  off stalls (kept)  host CV stalls  steal   wait  gapmax  lastlate"
    head += "  send p50/p99     wire  TTFTerr p50/p99   lag p50/p99  srv p99"
    print(head)
    witnessless = False
    for rate in (float(x) for x in args.rates.split(",")):
        m = measure(rate, args.seconds, args.tokens, args.gap, args.progress, args.realtime)
        if "host_cv" not in m and not witnessless:
            witnessless = True
            print("(no SCHED_FIFO here, so no witness: its four columns '-'; as root they give the host's own figure)")
        host = (
            f"{m['off_stall_cv']:6.3f} ({m['off_stall_share']:6.1%})  {m['host_cv']:6.3f} {m['stalls']:5d}"
            if "host_cv" in m
            else f"{'-':>6} {'-':>8}  {'-':>6} {'-':>5}"
        )
        print(
            f"{m['rate']:6g} {m['server_rate_pct']:7.2f}% {m['gap_cv']:6.3f} ({m['read_gap_cv']:5.3f})  "
            f"{host} {m['steal_ms']:4.0f}ms {m['wait_ms']:4.0f}ms "
            f"{m['gap_max_ms']:6.1f}ms {m['last_late_ms']:7.2f}ms {m['send_p50_ms']:6.2f}/{m['send_p99_ms']:<7.2f} "
            f"{m['wire_p50_ms']:6.3f}  "
            f"{m['ttft_err_p50_ms']:7.3f}/{m['ttft_err_p99_ms']:<7.3f} {m['lag_p50_ms']:6.3f}/{m['lag_p99_ms']:<6.3f} "
            f"{m['server_late_p99_ms']:6.3f}   ({m['matched']}/{m['requests']} matched)"
            f"{'  --realtime refused: sent at ordinary priority' if m['refused'] else ''}"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--witness"]:
        witness(sys.argv[2])
    else:
        asyncio.set_event_loop_policy(None)
        main()
