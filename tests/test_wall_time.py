"""run.json's started_at (and suite.json's finished_at) read in one place, run_info.wall_time: UTC when it names no
zone, converted when it names one, None when it is no ISO 8601 time; the catalog and the exporters read it alike."""

from __future__ import annotations

import datetime as dt

import pytest

from infermeter.catalog.entry import read_run
from infermeter.catalog.find import FoundRun
from infermeter.errors import UserError
from infermeter.exports.finished import wall_ns
from infermeter.records import RunInfo, write_records
from infermeter.run_info import wall_time
from tests.exports.test_request_rows import RECORDS_BY_HAND

MOMENT = dt.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "text", ["2025-01-02T03:04:05.678Z", "2025-01-02T03:04:05.678", "2025-01-02T05:04:05.678+02:00"]
)
def test_a_time_with_or_without_a_zone_is_one_utc_moment(text):
    assert wall_time(text) == MOMENT and wall_time(text).tzinfo == dt.UTC
    assert RunInfo(started_at=text).start_time() == MOMENT
    assert wall_ns(text) == 1735787045678000000  # 2025-01-02T03:04:05.678Z in ns since the epoch


def test_the_catalog_and_the_exporters_read_the_same_start(tmp_path):
    out = tmp_path / "run"
    write_records(out, RunInfo(kind="test", started_at="2025-01-02T05:04:05.678+02:00"), RECORDS_BY_HAND)
    assert read_run(FoundRun(out)).started_at == MOMENT.replace(tzinfo=None)  # DuckDB's TIMESTAMP: naive UTC
    assert wall_time("yesterday") is None and wall_ns("yesterday") is None
    write_records(tmp_path / "odd", RunInfo(kind="test", started_at="yesterday"), RECORDS_BY_HAND)
    with pytest.raises(UserError, match="started_at 'yesterday' is no ISO 8601 time"):
        read_run(FoundRun(tmp_path / "odd"))
