"""The summary's breakdowns against hand-computed values: latency by turn with the history's share of each prompt,
by model, and the waits for a slot; runs without such records have none (absent from summary.json)."""

from __future__ import annotations

import pytest

from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.breakdowns import DEFAULT_MODEL, HISTORY_TOKENS
from infermeter.metrics.summary_model import parse_summary
from infermeter.records import RequestRecord


def rec(
    rid: int,
    session: int | None,
    turn: int | None,
    inputs: int,
    submitted: float,
    tokens: list[float],
    status: str = "ok",
    model: str | None = None,
    wait: float | None = None,
) -> RequestRecord:
    return RequestRecord(
        request_id=rid,
        request_class="",
        input_tokens=inputs,
        output_tokens=len(tokens),
        max_tokens=8,
        scheduled_at=submitted,
        submitted_at=submitted,
        token_times=tokens,
        chunk_times=tokens,
        chunk_tokens=[1] * len(tokens),
        status=status,  # type: ignore[arg-type]
        error="" if status == "ok" else "HTTP 500: boom",
        session_id=session,
        turn=turn,
        model=model,
        slot_wait_s=wait,
    )


def two_sessions() -> list[RequestRecord]:
    """Session 0: turns of 10 and 30 input tokens (the second's history 10 + 5 = 15: half); session 1: 20 and 88
    (history 20 + 2 = 22: a quarter), its second turn failed."""
    return [
        rec(0, 0, 0, 10, 0.0, [0.1, 0.12, 0.15, 0.16, 0.2], model="a", wait=0.0),  # TTFT 100, ITL 20 30 10 40
        rec(1, 0, 1, 30, 1.0, [1.2, 1.21, 1.23, 1.26], model="b", wait=0.2),  # TTFT 200, ITL 10 20 30
        rec(2, 1, 0, 20, 0.5, [0.8, 0.85], model="a"),  # TTFT 300, ITL 50
        rec(3, 1, 1, 88, 2.0, [], status="error", model="b", wait=0.4),
    ]


def test_latency_by_turn_with_the_share_of_each_prompt_that_was_history():
    by = summarize(RecordColumns.from_records(two_sessions())).by_turn
    assert by is not None
    assert (by.sessions, by.turns, by.history_tokens) == (2, 4, HISTORY_TOKENS)
    assert by.history_share == pytest.approx((0 + 0.5 + 0 + 0.25) / 4)
    first, second = by.rows
    assert (first.turn, first.count, first.ok, first.history_share) == ("0", 2, 2, 0.0)
    assert [first.ttft_p50, first.ttft_p90, first.ttft_p99] == pytest.approx([200, 280, 298])
    assert [first.itl_p50, first.itl_p99] == pytest.approx([30, 49.6])  # of 10 20 30 40 50
    assert (second.turn, second.count, second.ok) == ("1", 2, 1)
    assert second.history_share == pytest.approx(0.375)
    assert [second.ttft_p50, second.ttft_p99] == pytest.approx([200, 200])
    assert [second.itl_p50, second.itl_p99] == pytest.approx([20, 29.8])


def test_latency_by_model_and_the_waits_for_a_slot():
    summary = summarize(RecordColumns.from_records(two_sessions()))
    assert summary.by_model is not None and set(summary.by_model) == {"a", "b"}
    a, b = summary.by_model["a"], summary.by_model["b"]
    assert (a.count, a.ok, a.ttft_p50, a.itl_p50) == (2, 2, pytest.approx(200), pytest.approx(30))
    assert (b.count, b.ok, b.ttft_p50, b.itl_p99) == (2, 1, pytest.approx(200), pytest.approx(29.8))
    wait = summary.slot_wait
    assert wait is not None
    assert (wait.recorded, wait.waited) == (3, 2)  # one recorded no wait, one has no figure
    assert [wait.p50_s, wait.p99_s, wait.max_s] == pytest.approx([0.3, 0.398, 0.4])


def test_many_turns_gather_in_a_last_row_and_requests_without_a_model_get_the_runs_label():
    records = [rec(t, 0, t, 10 * (t + 1), float(t), [t + 0.1, t + 0.2], model="x" if t else None) for t in range(10)]
    summary = summarize(RecordColumns.from_records(records))
    assert summary.by_turn is not None
    assert [(r.turn, r.count) for r in summary.by_turn.rows] == [*((str(t), 1) for t in range(7)), ("7+", 3)]
    # turn t's history: turn t-1's 10 t input and 2 output tokens, of its 10 (t + 1)
    assert summary.by_turn.rows[3].history_share == pytest.approx(32 / 40)
    assert summary.by_model is not None
    assert {k: v.count for k, v in summary.by_model.items()} == {DEFAULT_MODEL: 1, "x": 9}


def test_a_run_without_sessions_models_or_slots_has_no_breakdowns_in_its_summary():
    records = [rec(i, None, None, 10, float(i), [i + 0.1, i + 0.2]) for i in range(3)]
    summary = summarize(RecordColumns.from_records(records))
    assert (summary.by_turn, summary.by_model, summary.slot_wait) == (None, None, None)
    doc = summary.model_dump(mode="json")
    assert not {"by_turn", "by_model", "slot_wait"} & doc.keys()
    with_them = summarize(RecordColumns.from_records(two_sessions())).model_dump(mode="json")
    assert {"by_turn", "by_model", "slot_wait"} <= with_them.keys()
    assert parse_summary(with_them, "summary.json").model_dump(mode="json") == with_them  # read back the same
