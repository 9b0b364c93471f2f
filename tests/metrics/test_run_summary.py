"""A run directory's summary as every reader takes it (metrics.summary): summary.json as written, or, for a run that
left none, the summary `infermeter report` computes, with what only run.json knows (the client's health) kept.  The
catalog, the Python API's Run and `report` all get the same one."""

from __future__ import annotations

import orjson
import pytest

from infermeter.catalog.entry import RECOMPUTED, read_run
from infermeter.catalog.find import FoundRun
from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.summary import run_summary, summary_of_run
from infermeter.metrics.summary_model import read_summary
from infermeter.python_api.run_handle import open_run
from infermeter.records import SUMMARY, RunInfo, write_records, write_summary
from infermeter.run_info import ClientHealth
from tests.cli import exit_code
from tests.exports.test_request_rows import RECORDS_BY_HAND

HEALTH = ClientHealth(bound=False, cpu_fraction=0.25, tick_lag_ms_p99=1.5)


@pytest.fixture
def unfinished(tmp_path):
    """A run that left no summary.json (killed before it wrote one), with deadlines and the client's health."""
    out = tmp_path / "run"
    write_records(out, RunInfo(kind="test", client_health=HEALTH, deadlines="ttft=150ms,tbt=15ms"), RECORDS_BY_HAND)
    return out


def test_a_run_without_summary_json_is_summarized_alike_by_every_reader(unfinished, capsys):
    info = RunInfo.model_validate_json((unfinished / "run.json").read_bytes())
    assert read_summary(unfinished) is None
    computed = run_summary(unfinished, info)
    assert computed.client_health == HEALTH  # run.json's, which the records cannot give back
    assert computed.requests.total == 5 and computed.ttft_ms.n == 2  # r0 and r2 streamed a first token
    assert computed.fluidity is not None and computed.fluidity.index.n == 2  # run.json's deadlines
    catalog = read_run(FoundRun(unfinished))
    assert catalog.summary == computed and RECOMPUTED in catalog.notes
    assert open_run(unfinished).summary == computed
    assert exit_code(["report", str(unfinished), "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown == orjson.loads(computed.model_dump_json())


def test_a_stored_summary_is_read_as_written(unfinished):
    info = RunInfo.model_validate_json((unfinished / "run.json").read_bytes())
    stored = summarize(RecordColumns.of_run(unfinished), "A")  # differs from a recomputation: option A, no health
    write_summary(unfinished, stored)
    assert read_summary(unfinished) == stored and run_summary(unfinished, info) == stored
    assert read_run(FoundRun(unfinished)).notes == []


def test_options_given_replace_run_jsons(unfinished):
    info = RunInfo.model_validate_json((unfinished / "run.json").read_bytes())
    summary = summary_of_run(unfinished, info, slo={"ttft": 0.2}, deadlines="")
    # TTFT 100 ms (r0) and 250 ms (r2): one request of five meets 200 ms; "" asks for no deadlines at all
    assert (summary.goodput.met, summary.goodput.fraction) == (1, 0.2) and summary.fluidity is None
    assert summary_of_run(unfinished, info, itl_option="A").itl_option == "A"


def test_a_damaged_summary_is_one_line_naming_the_file(unfinished):
    (unfinished / SUMMARY).write_text("{not json")
    with pytest.raises(UserError, match=f"{unfinished / SUMMARY} is not a valid summary") as caught:
        read_summary(unfinished)
    assert "\n" not in str(caught.value)
    (unfinished / SUMMARY).write_text('{"schema_version": "infermeter.summary/99"}')
    with pytest.raises(UserError, match="cannot read"):
        read_summary(unfinished)
