"""How well the load generator's clock agrees with the server's, measured before the load (the IETF draft, 4.7.2: with
the two on different machines, NTP synchronization MUST achieve 10 ms or better, and the report MUST state the method
and the estimated accuracy).

A server on loopback shares the client's clock (4.7.1).  For a remote server two measurements, run together and
bounded in time (DATE_BUDGET_S in all), made once per URL in a process (a suite's levels reuse it, CACHE_S at most):
- the client's own NTP daemon, where one runs: chrony (`chronyc -c tracking`) or ntpd (`ntpq -c rv`), whose
  |offset| + root dispersion + root delay / 2 bounds the client clock's error against its reference;
- the server's HTTP `Date` header (HEAD requests: nothing but headers), which names the server's current second: a
  probe sent at client time s and answered at r with Date D places the offset (server - client) in [D - r, D + 1 - s).
  Probes are sent one after another around the instants the server's second turns over (found by a coarse pass, then
  predicted one second later), so the intersection narrows to about a round trip.  That holds only for servers known
  to take Date from their clock as they answer (PER_ANSWER_DATE: aiohttp, nginx, Caddy and Go's net/http, hyper);
  any other (uvicorn under vLLM and SGLang refreshes its Date once a second at any phase, and a proxy such as envoy
  may pass such a Date on) is allowed CACHED_DATE_LAG_S of lag, which bounds only gross offsets.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

import aiohttp

from infermeter.load.disclosure import SINGLE_MACHINE, is_loopback
from infermeter.load.target import RunTarget
from infermeter.run_info import ClockAccuracy, DateBound, NtpStatus

NTP_ACCURACY_MS = 10.0  # the IETF draft, 4.7.2: NTP synchronization MUST achieve 10 ms or better
COMMAND_TIMEOUT_S = 1.0  # chronyc / ntpq
PROBE_TIMEOUT_S = 1.0  # one Date probe, at most (less when the budget has less left)
DATE_BUDGET_S = 3.0  # every Date probe together, at most
COARSE_STEP_S = 0.02  # the first pass: one probe this often until the server's second turns over
MAX_COARSE = 80
MAX_FINE = 60  # the second pass: probes one after another across the predicted turn-over
# Server header products (name before "/") known to stamp Date from the clock as they answer; Go's net/http and hyper
# send no Server header of their own, so they are recognised only where a product in front names them
PER_ANSWER_DATE = frozenset({"aiohttp", "nginx", "caddy", "go", "hyper"})
CACHED_DATE_LAG_S = 1.5  # any other server: its Date may be a cached one, refreshed once a second at any phase
CACHE_S = 900.0  # a measurement is reused for the same URL within this process for this long
NO_HTTP = "the server answers gRPC only: no HTTP Date to bound its clock with"


@dataclass(frozen=True)
class DateProbe:
    """One probe: client wall-clock times it was sent and answered, and the server's Date (whole seconds)."""

    sent: float
    received: float
    date: int


def bound(probes: list[DateProbe], lag_s: float = 0.0) -> tuple[float, float]:
    """The offset (server - client, seconds) every probe allows: [max(D - r), min(D + 1 + lag - s)); lo > hi when
    they do not fit one offset."""
    lo = max(p.date - p.received for p in probes)
    hi = min(p.date + 1.0 + lag_s - p.sent for p in probes)
    return lo, hi


def date_lag(server: str | None) -> tuple[float, str]:
    """How late a server's Date may be (seconds), from its Server header, and the assumption in words: none for a
    server known to stamp Date as it answers, CACHED_DATE_LAG_S for any other."""
    products = {p.split("/", 1)[0].lower() for p in (server or "").split()}
    known = sorted(products & PER_ANSWER_DATE)
    if known:
        return 0.0, f"{server} ({known[0]}) stamps its Date as it answers: no lag allowed"
    who = f"{server} is" if server else "the server (no Server header) is"
    return CACHED_DATE_LAG_S, (
        f"{who} not known to stamp its Date as it answers (uvicorn refreshes it once a second, a proxy may pass one "
        f"on): {CACHED_DATE_LAG_S:g} s of lag allowed"
    )


def date_seconds(header: str) -> int:
    """An HTTP Date header as Unix seconds; a zone of "-0000" (which parsedate_to_datetime leaves naive) is UTC.
    Raises ValueError when it is not an HTTP date."""
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        raise ValueError(f"the server's Date header {header!r} is not an HTTP date") from None
    return int((moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp())


async def _probe(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], timeout_s: float
) -> tuple[DateProbe, str | None]:
    """HEAD the server once (headers only: GET / can be a large web page); its Date and Server headers.  Raises
    ValueError when the answer carries no Date."""
    sent = time.time()
    async with session.head(
        url, headers=headers, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout_s)
    ) as r:
        received = time.time()
        date, server = r.headers.get("Date"), r.headers.get("Server")
    if date is None:
        raise ValueError("the server's answers carry no Date header")
    return DateProbe(sent, received, date_seconds(date)), server


async def date_bound(url: str, headers: dict[str, str] | None = None, budget_s: float = DATE_BUDGET_S) -> DateBound:
    """Bound the server's clock offset from its Date headers: a coarse pass until its second turns over, then probes
    one after another across the next turn-over (predicted one second later).  At most `budget_s` seconds (each
    probe's timeout is what is left of it, PROBE_TIMEOUT_S at most) and MAX_COARSE + MAX_FINE probes.  Raises
    ValueError (why) when the server gives nothing to bound with."""
    deadline = time.monotonic() + budget_s
    probes: list[DateProbe] = []
    connector = aiohttp.TCPConnector(limit=1)  # one kept-alive connection: no handshake inside a probe after the first
    async with aiohttp.ClientSession(connector=connector) as session:

        async def probe() -> str | None:
            left = min(PROBE_TIMEOUT_S, deadline - time.monotonic())
            if left <= 0:
                raise ValueError(f"the Date probes ran out of their {budget_s:g} s")
            try:
                got, server = await _probe(session, url, headers or {}, left)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise ValueError(f"the server did not answer a Date probe ({type(exc).__name__})") from None
            probes.append(got)
            return server

        await probe()  # opens the connection: its round trip holds a handshake, the rest do not
        server = await probe()
        lag, assumed = date_lag(server)
        first = probes[-1].date
        try:
            while lag == 0.0 and probes[-1].date == first and len(probes) < MAX_COARSE and time.monotonic() < deadline:
                await asyncio.sleep(COARSE_STEP_S)
                await probe()
            lo, hi = bound(probes, lag)
            if lag == 0.0 and probes[-1].date != first and lo <= hi:
                turn = probes[-1].date + 1  # the next second: it begins on the client's clock in (turn - hi, turn - lo]
                rtt = min(p.received - p.sent for p in probes[1:])
                spacing = (hi - lo + 2 * rtt) / MAX_FINE  # spread over the window; one after another when it is narrow
                wait = turn - hi - rtt - time.time()
                if 0 < wait < deadline - time.monotonic():
                    await asyncio.sleep(wait)
                    for _ in range(MAX_FINE):
                        started = time.time()
                        if started > turn - lo + rtt or time.monotonic() > deadline:
                            break
                        await probe()
                        if probes[-1].date >= turn:  # turned over: the probes on either side bracket it
                            break
                        await asyncio.sleep(max(0.0, started + spacing - time.time()))
        except ValueError:  # the budget ran out, or a later probe went unanswered: the probes so far still bound
            pass
    lo, hi = bound(probes, lag)
    if lo > hi:
        raise ValueError(
            f"the server's Date headers fit no single clock offset over {len(probes)} probes (a cached or rounded "
            "Date): no bound"
        )
    return DateBound(
        probes=len(probes),
        offset_lo_ms=lo * 1000,
        offset_hi_ms=hi * 1000,
        rtt_ms_min=min(p.received - p.sent for p in probes[1:]) * 1000,
        server=server,
        lag_allowance_ms=lag * 1000,
        note=assumed,
    )


def _run(command: list[str]) -> str:
    """A command's output, or ValueError (why) when it is missing, fails or takes longer than COMMAND_TIMEOUT_S."""
    if shutil.which(command[0]) is None:
        raise ValueError(f"{command[0]} not found")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"{command[0]} failed ({type(exc).__name__})") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise ValueError(f"{command[0]}: {said[0] if said else f'exit status {done.returncode}'}")
    return done.stdout


def chrony_status(text: str) -> NtpStatus:
    """`chronyc -c tracking`'s one CSV line: reference id, name, stratum, ref time, system time offset, last offset,
    RMS offset, frequency, residual frequency, skew, root delay, root dispersion, update interval, leap status."""
    fields = text.strip().splitlines()[0].split(",") if text.strip() else []
    if len(fields) < 14:
        raise ValueError(f"chronyc tracking gave {len(fields)} fields, not 14")
    try:
        offset, delay, dispersion = (abs(float(fields[k])) * 1000 for k in (4, 10, 11))
    except ValueError:
        raise ValueError("chronyc tracking gave a field that is not a number") from None
    synchronised = fields[13].strip() != "Not synchronised"
    return NtpStatus(
        source="chrony (chronyc tracking)",
        synchronised=synchronised,
        offset_ms=offset,
        root_delay_ms=delay,
        root_dispersion_ms=dispersion,
        accuracy_ms=offset + dispersion + delay / 2 if synchronised else None,
        reference=fields[1] or fields[0],
    )


def ntpq_status(text: str) -> NtpStatus:
    """`ntpq -c "rv 0 leap,offset,rootdelay,rootdisp"`: key=value pairs in milliseconds; leap 11 is unsynchronised."""
    values = dict(re.findall(r"(\w+)=([^,\s]+)", text))
    try:
        offset, delay, dispersion = (abs(float(values[k])) for k in ("offset", "rootdelay", "rootdisp"))
    except (KeyError, ValueError):
        raise ValueError("ntpq gave no offset, rootdelay and rootdisp") from None
    synchronised = values.get("leap", "00") != "11"
    return NtpStatus(
        source="ntpd (ntpq -c rv)",
        synchronised=synchronised,
        offset_ms=offset,
        root_delay_ms=delay,
        root_dispersion_ms=dispersion,
        accuracy_ms=offset + dispersion + delay / 2 if synchronised else None,
    )


def ntp_status() -> tuple[NtpStatus | None, list[str]]:
    """The client's NTP daemon's view of its own clock (chrony first, then ntpd), and why each gave nothing."""
    why: list[str] = []
    for command, parse in (
        (["chronyc", "-c", "tracking"], chrony_status),
        (["ntpq", "-c", "rv 0 leap,offset,rootdelay,rootdisp"], ntpq_status),
    ):
        try:
            return parse(_run(command)), why
        except ValueError as exc:
            why.append(str(exc))
    return None, why


_MEASURED: dict[tuple[str, str | None], tuple[float, ClockAccuracy]] = {}  # (url, HTTP url) -> (when, what)


async def _date(url: str, headers: dict[str, str] | None, unavailable: list[str]) -> DateBound | None:
    """The Date bound, or None with why appended to `unavailable` (a probe of the clock never stops the run)."""
    try:
        return await date_bound(url, headers)
    except ValueError as exc:
        unavailable.append(str(exc))
    except Exception as exc:
        unavailable.append(f"the Date probes failed ({type(exc).__name__}: {exc})")
    return None


async def clock_accuracy(url: str, http_url: str | None, headers: dict[str, str] | None = None) -> ClockAccuracy:
    """The clock agreement a run can show: one clock when `url` is on loopback; else the client's NTP daemon and a
    Date bound from `http_url` (None: the server answers no HTTP), measured together, once per URL within CACHE_S
    in this process."""
    if not url or is_loopback(url):
        return ClockAccuracy(methods=[SINGLE_MACHINE], same_host=True)
    key = (url, http_url)
    if (cached := _MEASURED.get(key)) is not None and time.monotonic() - cached[0] < CACHE_S:
        age = time.monotonic() - cached[0]
        return cached[1].model_copy(
            update={
                "note": f"measured {age:.0f} s before this run for the same URL by this process, and reused (one "
                "measurement per URL serves a suite's levels)"
            }
        )
    unavailable: list[str] = []
    if http_url is None:
        unavailable.append(NO_HTTP)
        (ntp, why), date = await asyncio.to_thread(ntp_status), None
    else:
        (ntp, why), date = await asyncio.gather(asyncio.to_thread(ntp_status), _date(http_url, headers, unavailable))
    methods = [ntp.source] if ntp is not None else []
    methods += ["HTTP Date bracket against the server"] if date is not None else []
    got = ClockAccuracy(methods=methods, same_host=False, ntp=ntp, date=date, unavailable=why + unavailable)
    _MEASURED[key] = (time.monotonic(), got)
    return got


async def measure_clock(target: RunTarget, headers: dict[str, str]) -> ClockAccuracy:
    """clock_accuracy for a run's target: the OpenAI backend's URL answers HTTP; a gRPC target's HTTP port where it
    is known (the embedded emulator's)."""
    if target.backend == "openai":
        return await clock_accuracy(target.url, target.url, headers)
    url = target.url if "://" in target.url else f"grpc://{target.url}"  # host:port, as grpc_target accepts it
    return await clock_accuracy(url, target.metrics_url, headers)
