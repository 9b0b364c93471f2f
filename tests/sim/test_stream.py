"""Records streamed into the run directory while the simulation runs, against the run written in one piece."""

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from infermeter.engine.config import EngineConfig
from infermeter.records import JOURNAL, RECORDS, read_records
from infermeter.sim import simulate, write_sim_run
from infermeter.sim.run import expected_tokens, simulate_run
from infermeter.sim.stream import RecordStream
from infermeter.workload import STANDARD, ArrivalSpec, arrival_offsets, generate

SLO = {"ttft": 2.0, "e2e": 60.0}
DEADLINES = "ttft=2,tbt=0.05"


def _skewed(n: int, rate: float, seed: int = 5):
    r = generate(STANDARD["synthetic-skewed"], n, seed)
    r.arrival_s = arrival_offsets(ArrivalSpec(kind="poisson", rate=rate), n, seed)
    return r


# Overloaded pools finish requests far out of workload order (multi-bin serves its bins in turn), and a small KV
# capacity refuses some requests outright, so chunks are written while earlier requests still wait.
CASES = {
    "multi_bin": (EngineConfig(scheduler={"name": "multi_bin_dynamic", "bins": 4}, kv_capacity_tokens=3000), 3, 8.0),
    "continuous": (EngineConfig(scheduler="continuous", kv_capacity_tokens=3000), 2, 12.0),
}


@pytest.mark.parametrize("mode", ["full", "endpoints"])
@pytest.mark.parametrize("case", list(CASES))
def test_records_streamed_in_chunks_equal_those_written_in_one_piece(tmp_path, case, mode):
    config, engines, rate = CASES[case]
    r = _skewed(600, rate)
    whole = simulate(r, config, engines, seed=2)
    assert whole.rejected, "the case should refuse some requests"
    one = write_sim_run(whole, tmp_path / "one", {"name": "x", "seed": 5}, 5, mode, slo=SLO, deadlines=DEADLINES)
    streamed = simulate_run(
        r,
        config,
        engines,
        2,
        tmp_path / "chunks",
        {"name": "x", "seed": 5},
        mode,
        slo=SLO,
        deadlines=DEADLINES,
        chunk=7,
    )
    a, b = read_records(tmp_path / "one"), read_records(tmp_path / "chunks")
    assert b.equals(a)
    assert pq.ParquetFile(tmp_path / "chunks" / RECORDS).metadata.num_row_groups == -(-600 // 7)  # a batch a chunk
    assert pq.ParquetFile(tmp_path / "one" / RECORDS).metadata.num_row_groups == 1
    assert not (tmp_path / "chunks" / JOURNAL).exists()
    assert streamed.model_dump(mode="json") == one.model_dump(mode="json")
    assert (streamed.itl_source is not None) == (mode == "endpoints")


class _Watched(RecordStream):
    """Notes, at each chunk written, how many requests were still to finish, and the most rows it ever held."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.unfinished_at_write: list[int] = []
        self.most_rows = 0

    def add_runs(self, *runs) -> None:
        super().add_runs(*runs)
        self.most_rows = max(self.most_rows, len(self.owner))

    def write_rows(self, lo, rows) -> None:
        self.unfinished_at_write.append(self.n - sum(self.is_done))
        super().write_rows(lo, rows)


def test_chunks_leave_while_the_simulation_runs(tmp_path):
    config, engines, rate = CASES["multi_bin"]
    r = _skewed(800, rate)
    (tmp_path / "run").mkdir()
    stream = _Watched(r, tmp_path / "run", "endpoints", chunk=10)
    out = simulate(r, config, engines, seed=2, sink=stream)
    assert out.emissions is None
    early = [u for u in stream.unfinished_at_write if u > 0]
    assert len(early) > len(stream.unfinished_at_write) // 2  # most chunks left while requests were still running
    whole = simulate(r, config, engines, seed=2)
    assert whole.emissions is not None
    assert stream.most_rows < 0.75 * len(whole.emissions.owner)  # rows of written requests are dropped as it goes
    sealed = stream.seal()
    np.testing.assert_array_equal(sealed.ends.count, whole.ends.count)
    np.testing.assert_array_equal(sealed.ends.first, whole.ends.first)
    np.testing.assert_array_equal(sealed.ends.last, whole.ends.last)
    assert int(sealed.ends.count.sum()) == expected_tokens(r, config)
    with pytest.raises(ValueError, match="streamed"):
        write_sim_run(out, tmp_path / "again", {}, 2)


@pytest.mark.parametrize("case", list(CASES))
def test_the_summary_is_what_the_written_records_give(tmp_path, case):
    """summary.json is computed from the simulator's own arrays, not read back from records.parquet: recomputed
    from the records as `report` does, it is the same, refused requests, send times, classes and all."""
    from infermeter.metrics import RecordColumns, summarize
    from infermeter.metrics.fluidity import parse_deadlines
    from infermeter.metrics.summary_model import parse_summary

    config, engines, rate = CASES[case]
    r = _skewed(600, rate)
    run = tmp_path / "run"
    written = simulate_run(r, config, engines, 3, run, {}, "full", slo=SLO, deadlines=DEADLINES, chunk=64)
    assert 0 < written.requests.failed < written.requests.total  # some refused: both paths must mark them
    again = summarize(RecordColumns.of_run(run), "B", SLO, parse_deadlines(DEADLINES))
    stored = parse_summary(orjson.loads((run / "summary.json").read_bytes()), "summary.json")
    for s in (written, stored):
        assert s.model_dump(exclude={"sim"}) == again.model_dump(exclude={"sim"})
