"""The session driver (--multi-turn) against a loopback server that answers each turn "re: <its user text>": turn k's
messages hold the session's user turns 1..k with the replies between them, think time is the gap between a reply
and the next turn, users and arrivals bound the sessions under way, --requests counts turns, and a failed turn ends
its session only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace

import numpy as np
import orjson
import pytest
from aiohttp import web

from infermeter.client.openai_sse import ClientConfig, Message, OpenAIClient, PreparedRequest
from infermeter.conduct.senders import LocalSender, Shipment
from infermeter.load.conversation import JOINER
from infermeter.load.driver import LiveStats, LoadPattern
from infermeter.load.sessions import (
    Conversation,
    SessionRules,
    SessionTurn,
    conversations,
    converse,
    first_turns,
)
from infermeter.load.stopping import Stopper
from infermeter.records import RequestRecord, RunClock
from infermeter.workload.think_time import ThinkTime
from tests.load.runs import configured
from tests.loopback import serving
from tests.prompts import cl100k, prompter

EVENT_GAP_S = 0.005  # between the two content events of a reply


class Echo:
    """Answers a chat or completions request with "re: <last user text>" in two content events (a 500 when that
    text holds FAIL), and keeps every body it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.bodies.append(body)
        chat = "messages" in body
        last = body["messages"][-1]["content"] if chat else body["prompt"].rsplit(JOINER, 1)[-1]
        if "FAIL" in last:
            return web.Response(status=500, text="boom")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for k, piece in enumerate(("re:", f" {last}")):
            if k:
                await asyncio.sleep(EVENT_GAP_S)
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            await resp.write(b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/completions", self.handle)
        return app


@contextlib.asynccontextmanager
async def echo_client(echo: Echo, chat: bool = True) -> AsyncIterator[OpenAIClient]:
    async with serving(echo.app()) as url:
        client = OpenAIClient(ClientConfig(url, api="chat" if chat else "completions", ignore_eos=False), RunClock())
        try:
            yield client
        finally:
            await client.close()


def text(session: int, turn: int) -> str:
    return f"session {session} turn {turn}"


def sessions(
    n: int, turns: int, fail: tuple[int, int] | None = None, system: str | None = None, replies: bool = False
) -> list[Conversation]:
    """n sessions of `turns` turns each, request ids in order; `fail`: the (session, turn) whose text holds FAIL."""
    out = []
    for s in range(n):
        steps = []
        for t in range(turns):
            words = text(s, t) + (" FAIL" if (s, t) == fail else "")
            opening = (Message("system", system), Message("user", words)) if system and t == 0 else None
            req = PreparedRequest(s * turns + t, words, 3, 8, messages=opening, session_id=s, turn=t)
            steps.append(SessionTurn(req, f"dataset reply {s}.{t}" if replies else None))
        out.append(Conversation(s, tuple(steps)))
    return out


def rules(chat: bool = True, think: str = "0", history: str = "replies", turns: int | None = None) -> SessionRules:
    return SessionRules(
        prompter(chat),
        chat,
        ThinkTime.parse(think),
        history,
        turns,
        seed=1,  # type: ignore[arg-type]
    )


async def run(
    convs: list[Conversation], pattern: LoadPattern, chat: bool = True, **kw: object
) -> tuple[Echo, list[RequestRecord], list[tuple[PreparedRequest, float]], object]:
    echo, records, sends = Echo(), [], []
    async with echo_client(echo, chat) as client:
        outcome = await converse(
            client, convs, pattern, records.append, rules(chat, **kw), on_send=lambda r, at: sends.append((r, at))
        )
    return echo, records, sends, outcome


def chat_tokens(messages: list[dict]) -> int:
    template = prompter(True).template
    assert template is not None
    return len(cl100k().encode(template.render(messages)))


async def test_each_turn_carries_the_user_turns_before_it_and_the_servers_actual_replies():
    echo, records, sends, outcome = await run(sessions(3, 4), LoadPattern(concurrency=2))
    assert len(echo.bodies) == 12 and len(records) == 12
    longest = 0
    for body in echo.bodies:
        messages = body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        s = int(users[0].split()[1])
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(users) - 1) + ["user"]
        assert users == [text(s, t) for t in range(len(users))]  # human turns 1..k, in order
        assert [m["content"] for m in messages if m["role"] == "assistant"] == [f"re: {u}" for u in users[:-1]]
        longest = max(longest, len(users))
    assert longest == 4
    for rec in records:
        assert rec.status == "ok" and rec.session_id == rec.request_id // 4 and rec.turn == rec.request_id % 4
    # each turn's count is the exact count of the conversation it sent, after the chat template
    counted = {r.request_id: r.ref_input_tokens for r in records}
    for req, _ in sends:
        assert req.messages is not None
        want = chat_tokens([{"role": m.role, "content": m.content} for m in req.messages])
        assert req.input_tokens == req.ref_input_tokens == counted[req.request_id] == want
    assert outcome.started == outcome.finished == 3


async def test_history_dataset_carries_the_datasets_replies_and_a_system_message_opens_every_turn():
    convs = sessions(2, 3, system="be brief", replies=True)
    echo, _, _, _ = await run(convs, LoadPattern(concurrency=2), history="dataset")
    assert len(echo.bodies) == 6
    for body in echo.bodies:
        messages = body["messages"]
        assert messages[0] == {"role": "system", "content": "be brief"}
        users = [m["content"] for m in messages if m["role"] == "user"]
        s = int(users[0].split()[1])
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert replies == [f"dataset reply {s}.{t}" for t in range(len(users) - 1)]


async def test_completions_get_the_conversation_joined_by_blank_lines():
    echo, records, sends, _ = await run(sessions(1, 3), LoadPattern(concurrency=1), chat=False)
    prompts = [b["prompt"] for b in echo.bodies]
    t0, t1, t2 = (text(0, t) for t in range(3))
    assert prompts == [t0, JOINER.join([t0, f"re: {t0}", t1]), JOINER.join([t0, f"re: {t0}", t1, f"re: {t1}", t2])]
    assert [r.input_tokens for r in sorted(records, key=lambda r: r.request_id)] == [
        len(cl100k().encode(p)) for p in prompts
    ]
    assert all(req.messages is None for req, _ in sends)


async def test_think_time_is_the_gap_between_a_reply_and_the_next_turn():
    _, records, _, _ = await run(sessions(2, 5), LoadPattern(concurrency=2), think="fixed:200ms")
    by_id = {r.request_id: r for r in records}
    gaps, planned = [], []
    for rec in records:
        if rec.turn:
            before = by_id[rec.request_id - 1]
            gaps.append(rec.submitted_at - before.token_times[-1])
            planned.append(rec.scheduled_at - before.token_times[-1])
    assert len(gaps) == 8
    assert 0.195 <= float(np.median(gaps)) <= 0.225
    assert 0.195 <= float(np.median(planned)) <= 0.215
    # and without a think time the next turn follows the reply at once
    _, records, _, _ = await run(sessions(1, 4), LoadPattern(concurrency=1))
    by_id = {r.request_id: r for r in records}
    quick = [r.submitted_at - by_id[r.request_id - 1].token_times[-1] for r in records if r.turn]
    assert float(np.median(quick)) < 0.02


def most_at_once(records: list[RequestRecord]) -> int:
    """The most sessions under way at one time: from a session's first send to its last reply's end."""
    spans: dict[int, list[float]] = {}
    for r in records:
        assert r.session_id is not None
        lo, hi = spans.setdefault(r.session_id, [np.inf, -np.inf])
        spans[r.session_id] = [min(lo, r.submitted_at), max(hi, r.token_times[-1])]
    return max(sum(lo <= start < hi for lo, hi in spans.values()) for start, _ in spans.values())


async def test_a_closed_loop_of_n_users_keeps_at_most_n_sessions_under_way():
    _, records, _, outcome = await run(sessions(6, 3), LoadPattern(concurrency=2), think="fixed:30ms")
    assert len(records) == 18 and outcome.finished == 6
    assert most_at_once(records) == 2
    # each user runs its session's turns in order, one after another
    for s in range(6):
        mine = sorted((r for r in records if r.session_id == s), key=lambda r: r.submitted_at)
        assert [r.turn for r in mine] == [0, 1, 2]


async def test_an_open_loop_starts_each_session_at_its_offset():
    offsets = np.array([0.0, 0.25, 0.5])
    _, records, _, _ = await run(sessions(3, 2), LoadPattern(offsets=offsets), think="fixed:50ms")
    firsts = sorted((r for r in records if r.turn == 0), key=lambda r: r.session_id or 0)
    starts = np.array([r.scheduled_at for r in firsts])
    assert starts - starts[0] == pytest.approx(offsets, abs=1e-9)
    # each later session is sent at its offset, before the next one is due (the first opened the connection)
    assert all(0 <= r.submitted_at - r.scheduled_at < 0.25 for r in firsts[1:])
    assert len(records) == 6  # the sessions' later turns go after the schedule is spent
    # a duration leaves out the sessions due from its end on
    _, records, _, outcome = await run(sessions(3, 2), LoadPattern(offsets=offsets, duration=0.3))
    assert sorted({r.session_id for r in records}) == [0, 1] and outcome.started == 2


async def test_requests_count_turns():
    _, records, _, outcome = await run(sessions(3, 3), LoadPattern(concurrency=1), turns=5)
    assert [(r.session_id, r.turn) for r in sorted(records, key=lambda r: r.submitted_at)] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1)
    ]  # fmt: skip
    assert (outcome.started, outcome.finished, outcome.cut, outcome.unsent_at_end) == (2, 1, 1, 1)
    assert any("cut short" in n for n in outcome.notes())


async def test_a_failed_turn_ends_its_session_and_the_run_goes_on():
    _, records, _, outcome = await run(sessions(2, 4, fail=(0, 1)), LoadPattern(concurrency=1))
    got = sorted((r.session_id, r.turn, r.status) for r in records)
    assert got == [(0, 0, "ok"), (0, 1, "error"), (1, 0, "ok"), (1, 1, "ok"), (1, 2, "ok"), (1, 3, "ok")]
    assert (outcome.started, outcome.finished, outcome.failed, outcome.unsent_after_failure) == (2, 1, 1, 2)
    assert any("2 later turns were not sent" in n for n in outcome.notes())


async def test_a_stop_during_a_think_time_ends_the_run_with_every_sent_turn_recorded():
    echo, records = Echo(), []
    stop = asyncio.Event()
    async with echo_client(echo) as client:
        driving = asyncio.create_task(
            converse(client, sessions(2, 3), LoadPattern(concurrency=2), records.append, rules(think="fixed:60s"),
                     stop=stop)
        )  # fmt: skip
        while len(records) < 2:
            await asyncio.sleep(0.01)
        stop.set()
        outcome = await asyncio.wait_for(driving, 5)
    assert len(records) == len(echo.bodies) == 2
    assert outcome.cut == 2 and outcome.unsent_at_end == 4


def test_turns_group_into_sessions_in_order_with_their_dataset_replies():
    reqs = [
        PreparedRequest(i, f"t{i}", 1, 1, session_id=s, turn=t) for i, (s, t) in enumerate([(0, 0), (0, 1), (1, 0)])
    ]
    reqs.append(PreparedRequest(3, "alone", 1, 1))
    got = list(conversations(iter(reqs), ["a", "b", None, None]))
    assert [(c.session_id, [t.request.request_id for t in c.turns]) for c in got] == [
        (0, [0, 1]),
        (1, [2]),
        (None, [3]),
    ]
    assert [t.reply for t in got[0].turns] == ["a", "b"]
    assert first_turns(np.array([0, 0, 0, 1, 2, 2])).tolist() == [0, 3, 4]
    assert first_turns(np.zeros(0, dtype=np.int64)).tolist() == []


class Ledger:
    """The run writer's part a sender uses: records appended, sends noted."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.sends: list[tuple[int, float, int, int]] = []

    def append(self, record: RequestRecord) -> None:
        self.records.append(record)

    def sent(self, request_id: int, at: float, input_tokens: int, max_tokens: int) -> None:
        self.sends.append((request_id, at, input_tokens, max_tokens))


def multi_turn_plan(history: str, replies: list[str], requests: int | None) -> SimpleNamespace:
    """The parts of a RunPlan the local sender reads for a multi-turn run (the lead's plan makes the real one)."""
    config = configured(
        None, workload={"multi_turn": True, "history": history, "think_time": "fixed:10ms"}, load={"concurrency": 1}
    )
    work = SimpleNamespace(
        requests=SimpleNamespace(replies=np.asarray(replies, dtype=object)),
        pattern=LoadPattern(concurrency=1),
        asked=requests,
        min_duration=None,
    )
    return SimpleNamespace(
        config=config, target=SimpleNamespace(client=SimpleNamespace(api="chat")), work=work, seed=3, grace_s=5.0
    )


async def test_the_local_sender_sends_a_multi_turn_plan_as_sessions_and_notes_what_became_of_them():
    convs = sessions(2, 3, fail=(1, 1), replies=True)
    turns = [t.request for c in convs for t in c.turns]
    echo, ledger, notes = Echo(), Ledger(), SimpleNamespace(notes=[], client=None, client_health=None)
    plan = multi_turn_plan("dataset", [t.reply for c in convs for t in c.turns], requests=5)
    async with echo_client(echo) as client:
        shipment = Shipment(
            plan,
            client,
            client.clock,
            prompter(True),
            turns,
            notes,
            ledger,
            LiveStats(),
            Stopper(),  # type: ignore[arg-type]
        )
        await LocalSender(open_loop=False).send(shipment)
    assert sorted((r.session_id, r.turn, r.status) for r in ledger.records) == [
        (0, 0, "ok"), (0, 1, "ok"), (0, 2, "ok"), (1, 0, "ok"), (1, 1, "error")
    ]  # fmt: skip
    assert [m["content"] for m in echo.bodies[2]["messages"] if m["role"] == "assistant"] == [
        "dataset reply 0.0", "dataset reply 0.1"
    ]  # fmt: skip
    assert [s[2] for s in ledger.sends] == [
        r.input_tokens for r in sorted(ledger.records, key=lambda r: r.submitted_at)
    ]
    assert notes.notes[0] == "multi-turn: 2 sessions started, 1 answered to their last turn"
    assert any("1 later turns were not sent" in n for n in notes.notes)


def test_a_cluster_refuses_multi_turn_sessions():
    from infermeter.config.run import RunConfig

    with pytest.raises(ValueError, match="--multi-turn sessions wait on their own replies in this process"):
        RunConfig.model_validate({"workload": {"multi_turn": True}, "load": {"rate": 1}, "scale": {"workers": 2}})
