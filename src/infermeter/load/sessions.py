"""The session driver (--multi-turn): each conversation sent turn by turn, turn k carrying the history before it.

Closed loop: `concurrency` users, each running one session after another, its turns in order.  Open loop: each session
starts at its offset (`pattern.offsets`: one per session, its first turn's), launched by the pacer (load.pacer) as the
open loop's sends are.  Turn k goes when the reply to turn k-1 has ended and a think time has passed, nothing else:
its request is built from the conversation so far at that instant, its bytes are written, and only then is it counted
(the exact tokens of what was sent, load.conversation) and noted.  A failed turn ends its session, since the turns
after it cannot be sent without its reply; --requests counts turns.  Every turn sent reaches `sink` as one record,
and a stop ends the run as the load driver's does (load.driver: a grace period, then cancellation).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from infermeter.alarm import SPIN_S, Alarm, sleep_until
from infermeter.client.backend import Backend
from infermeter.client.request import PreparedRequest
from infermeter.load.client_health import HealthProbe
from infermeter.load.conversation import Transcript
from infermeter.load.driver import SPENT_CHECK_S, LiveStats, LoadPattern, OnSend, finish_in_flight, quiet_gc
from infermeter.load.pacer import Pacer
from infermeter.records import RequestRecord
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.think_time import ThinkTime

History = Literal["replies", "dataset"]
THINK_STREAM = 23  # the random stream think times draw from ([seed, THINK_STREAM, session]): one per session


@dataclass(frozen=True)
class SessionTurn:
    """One turn of a session: its request (the user's text in `prompt`) and the dataset's reply to it, if any."""

    request: PreparedRequest
    reply: str | None = None


@dataclass(frozen=True)
class Conversation:
    """One session's turns, in order."""

    session_id: int | None
    turns: tuple[SessionTurn, ...]


def conversations(
    turns: Iterable[PreparedRequest], replies: Iterable[str | None] | None = None
) -> Iterator[Conversation]:
    """The run's turns (session-major, as the plan's requests are) grouped into sessions, lazily: consecutive turns
    of one session_id (a turn without one is a session alone); `replies`: the dataset's reply to each turn, in the
    same order (None: no dataset replies)."""
    answers: Iterable[str | None] = replies if replies is not None else itertools.repeat(None)
    pending: list[SessionTurn] = []
    for req, reply in zip(turns, answers, strict=False):
        if pending and (req.session_id is None or req.session_id != pending[0].request.session_id):
            yield Conversation(pending[0].request.session_id, tuple(pending))
            pending = []
        pending.append(SessionTurn(req, None if reply is None else str(reply)))
    if pending:
        yield Conversation(pending[0].request.session_id, tuple(pending))


def first_turns(session: np.ndarray) -> np.ndarray:
    """The rows that open a session, of a session-major column of session indices (the plan's `Requests.session`):
    an open loop's per-session offsets are the arrivals at these rows."""
    if not len(session):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate([[True], session[1:] != session[:-1]]))


@dataclass(frozen=True)
class SessionRules:
    """How sessions are sent: the think time after each reply (seeded per session), whose replies the history
    carries ("replies": the server's; "dataset": the dataset's where a turn has one, else the server's), the most
    turns to send (--requests; None: every turn), and how prompts are counted (the run's prompter; `chat`: the chat
    API, which sends messages)."""

    prompter: ExactPrompter
    chat: bool
    think: ThinkTime = field(default_factory=lambda: ThinkTime("fixed", 0.0))
    history: History = "replies"
    turns: int | None = None
    seed: int = 0


@dataclass
class SessionOutcome:
    """What became of the sessions a run started (run.json's notes say it)."""

    started: int = 0
    finished: int = 0  # every turn answered
    failed: int = 0  # ended at a failed turn
    unsent_after_failure: int = 0  # the turns after those
    cut: int = 0  # ended by the run's end (--requests, --duration, a stop) before their last turn
    unsent_at_end: int = 0  # the turns those did not send
    textless: int = 0  # ok replies whose text the backend did not give (their history carries an empty reply)

    def notes(self) -> list[str]:
        out = [f"multi-turn: {self.started} sessions started, {self.finished} answered to their last turn"]
        if self.failed:
            out.append(
                f"multi-turn: {self.failed} sessions ended at a failed turn; their {self.unsent_after_failure} later "
                "turns were not sent (a turn cannot be sent without the reply before it)"
            )
        if self.cut:
            out.append(f"multi-turn: {self.cut} sessions were cut short by the end of the run ({self.unsent_at_end} "
                       "turns not sent)")  # fmt: skip
        if self.textless:
            out.append(
                f"multi-turn: {self.textless} replies came without their text (the backend does not give it): the "
                "history carries them as empty messages"
            )
        return out


async def converse(
    client: Backend,
    sessions: Iterable[Conversation],
    pattern: LoadPattern,
    sink: Callable[[RequestRecord], None],
    rules: SessionRules,
    stats: LiveStats | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 30.0,
    lead_s: float = 0.02,
    hard_stop: asyncio.Event | None = None,
    on_send: OnSend | None = None,
    probe: HealthProbe | None = None,
) -> SessionOutcome:
    """Send the sessions under the pattern; every turn sent reaches `sink` as exactly one record, a cancelled one
    included, and `on_send(turn, scheduled_at)` is told of it (its input_tokens the exact count of what was sent).
    The schedule starts `lead_s` from now; `probe` is told how late each turn's send started.  Returns what became
    of the sessions; an error inside one (a chat template that cannot render its conversation) stops the run and is
    raised once every turn sent is recorded."""
    stop = stop or asyncio.Event()
    run = _Sessions(client, sink, rules, stats or LiveStats(), stop, on_send, probe, pattern, lead_s)
    with quiet_gc():
        try:
            if pattern.offsets is not None:
                await run.open_loop(sessions, pattern.offsets)
            else:
                await run.closed_loop(sessions)
            await finish_in_flight(run.tasks, stop, grace_s, run.stats, hard_stop or asyncio.Event())
        finally:
            run.close()
    if run.error is not None:
        raise run.error
    return run.outcome


@dataclass
class _Flight:
    """A turn on its way: its record, what finishes its exchange, and where its reply's text lands."""

    record: RequestRecord
    exchange: Awaitable[RequestRecord]
    texts: list[str]  # the server's reply, once its stream ended well (PreparedRequest.on_reply)
    dataset_reply: str | None
    ended: float = 0.0  # when the exchange ended, on the run clock


class _Sessions:
    """One drive of sessions: what every turn's send shares."""

    def __init__(
        self,
        client: Backend,
        sink: Callable[[RequestRecord], None],
        rules: SessionRules,
        stats: LiveStats,
        stop: asyncio.Event,
        on_send: OnSend | None,
        probe: HealthProbe | None,
        pattern: LoadPattern,
        lead_s: float,
    ) -> None:
        self.client, self.clock, self.sink, self.rules = client, client.clock, sink, rules
        self.stats, self.stop, self.on_send, self.probe, self.pattern = stats, stop, on_send, probe, pattern
        self.t_start = self.clock.now() + lead_s
        self.deadline = self.t_start + pattern.duration if pattern.duration is not None else None
        self.floor = pattern.min_requests or 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.outcome = SessionOutcome()
        self.sent = 0
        self.spent = asyncio.Event()  # --requests turns sent: nothing more goes
        self.stopper = asyncio.ensure_future(stop.wait())
        self.paced: Pacer | None = None
        self.error: BaseException | None = None

    def close(self) -> None:
        self.stopper.cancel()
        if self.paced is not None:
            self.paced.close()

    def may_send(self, at: float) -> bool:
        """Whether a turn due at `at` goes: not after a stop, past --requests, or from the end of the duration on
        (a closed loop bounded by both a count and a time sends its count first)."""
        if self.stop.is_set() or self.spent.is_set():
            return False
        return self.deadline is None or at < self.deadline or self.sent < self.floor

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        """A session or user ended: one that raised stops the run, and its error is raised at the end."""
        self.tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        self.fail(task.exception())

    def fail(self, error: BaseException | None) -> None:
        """Stop the run for an error (the first is raised when every turn sent is recorded)."""
        if self.error is None:
            self.error = error
        self.stop.set()

    def begin(self, turn: SessionTurn, transcript: Transcript, at: float) -> _Flight:
        """Send a turn now: its request from the conversation so far, its bytes written at once where they can be
        (`Backend.start`), then its count and its notes."""
        req = transcript.ask(turn.request)
        texts: list[str] = []
        if self.rules.history == "replies" or turn.reply is None:
            req = dataclasses.replace(req, on_reply=texts.append)
        lag = self.clock.now() - at
        rec = req.record(at)
        try:
            exchange = self.client.start(req, at, rec)
        except Exception:  # what could not be written at once is sent (and its failure recorded) by `send`
            exchange = self.client.send(req, at, rec)
        flight = _Flight(rec, exchange, texts, turn.reply)
        self.sent += 1
        if self.rules.turns is not None and self.sent >= self.rules.turns:
            self.spent.set()
        self.stats.sent += 1
        try:
            tokens = transcript.count(req)
        except BaseException:
            self.spawn(self.finish(flight))  # sent: it is recorded whatever went wrong here
            raise
        rec.input_tokens = rec.ref_input_tokens = tokens
        if self.probe is not None:
            self.probe.sent(lag)
        if self.on_send is not None:
            self.on_send(dataclasses.replace(req, input_tokens=tokens, ref_input_tokens=tokens), at)
        return flight

    async def finish(self, flight: _Flight) -> None:
        """The turn's reply, then its record (a cancelled turn is recorded too, then the cancellation goes on)."""
        try:
            await flight.exchange
        finally:
            flight.ended = self.clock.now()
            self.stats.record(flight.record)
            self.sink(flight.record)
            if self.paced is not None:
                self.paced.poll()  # a send due while the loop read this reply goes now

    async def until(self, at: float) -> None:
        """Wait until `at` on the run clock, or a stop: on asyncio's timer (which may fire a millisecond early or
        late) to SPIN_S short of it, then a turn of the loop at a time (alarm.sleep_until)."""
        while not self.stop.is_set() and (left := at - self.clock.now()) > SPIN_S:
            await asyncio.wait((self.stopper,), timeout=left - SPIN_S)
        if not self.stop.is_set():
            await sleep_until(self.clock.t0 + at)

    async def session(self, conv: Conversation, transcript: Transcript, first: _Flight) -> None:
        """A session whose first turn `first` was sent: each next turn after its reply and a think time."""
        outcome, turns = self.outcome, conv.turns
        outcome.started += 1
        rng = np.random.default_rng([self.rules.seed, THINK_STREAM, conv.session_id or 0])
        flight, last = first, 0  # the turn on its way, and its index
        try:
            while True:
                await self.finish(flight)
                if flight.record.status != "ok":
                    outcome.failed += 1
                    outcome.unsent_after_failure += len(turns) - last - 1
                    return
                transcript.answer(self._reply(flight))
                if last + 1 == len(turns):
                    outcome.finished += 1
                    return
                at = flight.ended + self.rules.think.sample(rng)
                await self.until(at)
                if not self.may_send(at):
                    outcome.cut += 1
                    outcome.unsent_at_end += len(turns) - last - 1
                    return
                last += 1
                flight = self.begin(turns[last], transcript, at)
        except asyncio.CancelledError:
            outcome.cut += 1
            outcome.unsent_at_end += len(turns) - last - 1
            raise

    def _reply(self, flight: _Flight) -> str:
        """What the history carries for an answered turn: the dataset's reply (--history dataset, where the turn has
        one), else the server's."""
        if self.rules.history == "dataset" and flight.dataset_reply is not None:
            return flight.dataset_reply
        if not flight.texts:
            self.outcome.textless += 1
            return ""
        return flight.texts[0]

    def start(self, conv: Conversation, at: float) -> Coroutine[Any, Any, None]:
        """A session's first turn sent now; what runs the rest of it."""
        transcript = Transcript(self.rules.prompter, self.rules.chat)
        return self.session(conv, transcript, self.begin(conv.turns[0], transcript, at))

    async def closed_loop(self, sessions: Iterable[Conversation]) -> None:
        """`concurrency` users, each running its next session the moment its last ended, from `t_start` (released
        together with a barrier); returns when they ran out of sessions or time, or at a stop."""
        assert self.pattern.concurrency is not None and self.pattern.concurrency > 0
        queue, gate = iter(sessions), asyncio.Event()

        async def user() -> None:
            if self.pattern.barrier:
                await gate.wait()
            for conv in queue:
                now = self.clock.now()
                if not self.may_send(now):
                    return
                await self.start(conv, now)

        for _ in range(self.pattern.concurrency):
            self.spawn(user())
        await self.until(self.t_start)
        gate.set()
        running = set(self.tasks)
        while running and not self.stop.is_set():
            done, _ = await asyncio.wait(running | {self.stopper}, return_when=asyncio.FIRST_COMPLETED)
            running -= done

    async def open_loop(self, sessions: Iterable[Conversation], offsets: np.ndarray) -> None:
        """Each session's first turn at its offset from `t_start`, launched by the pacer; returns when the schedule
        is spent, --requests turns were sent, or at a stop (sessions under way are the caller's to finish)."""
        due: deque[Conversation] = deque()
        duration = self.pattern.duration

        def scheduled() -> Iterator[tuple[PreparedRequest, float]]:
            for conv, offset in zip(sessions, offsets, strict=False):
                if duration is not None and offset >= duration:  # [0, duration)
                    return
                due.append(conv)
                yield conv.turns[0].request, self.t_start + float(offset)

        def launch(_: PreparedRequest, at: float) -> None:
            conv = due.popleft()
            if self.may_send(at):
                try:
                    self.spawn(self.start(conv, at))
                except Exception as exc:  # raised in the pacer's poll, wherever that is: it stops the run instead
                    self.fail(exc)

        pacer = self.paced = Pacer(scheduled(), launch, self.clock, self.stop)
        spent = asyncio.ensure_future(self.spent.wait())
        try:
            self.client.pace(pacer.poll)
            pacer.arm(Alarm.open(self.clock, pacer.poll))
            while True:
                pacer.poll()
                if not pacer.pending or self.spent.is_set():
                    break
                delay = pacer.due - self.clock.now()
                wake = (self.stopper, spent)
                if pacer.alarm is not None:  # the alarm sends; this wakes to see the schedule spent or stopped
                    await asyncio.wait(wake, timeout=max(delay, 0.0) + SPENT_CHECK_S, return_when="FIRST_COMPLETED")
                elif delay > 0:
                    await asyncio.wait(wake, timeout=delay, return_when="FIRST_COMPLETED")
                else:
                    await asyncio.sleep(0)
        finally:
            self.client.pace(None)
            pacer.close()
            spent.cancel()
