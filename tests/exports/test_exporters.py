"""The exporters run at the end of a run or suite (`--export`): a Prometheus textfile read back with prometheus_client's
parser, OTLP/HTTP JSON parsed by a local receiver with OpenTelemetry's own schema, and an MLflow file store read back
with MlflowClient; each figure checked against summary.json, and every failure a warning line, never an exception.

The runs are simulations on the virtual clock (`infermeter sim`, well under a second each)."""

from __future__ import annotations

import math
import os
import socket
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infermeter import secrets
from infermeter.errors import UserError
from infermeter.exports import mlflow_run, otlp, otlp_metrics, prometheus
from infermeter.exports.failure import ExportFailed
from infermeter.exports.finished import FinishedRun, read_run, read_suite, wall_ns
from infermeter.exports.measures import DISTRIBUTIONS, SINGLE, measure
from infermeter.exports.send import check_exports, export_run, export_suite, exporter, why
from infermeter.exports.spec import EXPORT_KINDS, ExportSpec, parse_export
from infermeter.metrics.headline import HEADLINE_STATS, Figure
from infermeter.run_info import wall_clock_iso
from infermeter.suite_result import Analysis, RunRef, SuiteResult
from tests.cli import exit_code
from tests.exports.otlp_receiver import otlp_receiver

REQUESTS = 100
SLO = "ttft=1s"  # the run has a goodput, and Metron deadlines give it a fluidity
DEADLINES = "ttft=1s,tbt=20ms"
SUITE_FIGURES = {"max_output_tok_s": 1234.5, "ttft_p99_ms_30%": 250.0, "stable": True, "modality": "unimodal"}
SUITE_HEADLINE = {"max_output_tok_s": "tok/s", "ttft_p99_ms_30%": "ms"}


def simulate(out: Path, requests: int = REQUESTS, *args: str) -> Path:
    code = exit_code(["sim", "--requests", str(requests), "--out", str(out), *args])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated run of 100 requests with an SLO and deadlines."""
    return simulate(tmp_path_factory.mktemp("exports") / "sim-run", REQUESTS, "--slo", SLO, "--deadlines", DEADLINES)


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished suite: two simulated runs and a third its suite.json names whose directory is gone."""
    from infermeter.suites.execute import save

    root = tmp_path_factory.mktemp("exports") / "suite-x"
    refs = []
    for key, rate in (("r1", "2"), ("r2", "8"), ("gone", "4")):
        run = root / "runs" / key
        if key != "gone":
            simulate(run, 40, "--rate", rate)
        refs.append(RunRef(key=key, label=f"{rate} req/s", run_dir=str(run), reused=False, level=key))
    result = SuiteResult(
        suite="tradeoff", section="5.3", reference="IETF draft, section 5.3", title="Throughput-Latency Tradeoff",
        quick=True, params={"capacity": 20.0, "levels": [0.1, 0.5]}, command="infermeter test tradeoff --quick",
        directory=str(root), runs=refs, analysis=Analysis(figures=SUITE_FIGURES, headline=SUITE_HEADLINE),
        requirements=[], verdict="conditionally compliant", started_at=wall_clock_iso(), finished_at=wall_clock_iso(),
    )  # fmt: skip
    save(root, result)
    return root


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receivers are on this machine: a proxy set in the environment must not carry the requests away."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)


def summary_of(run: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((run / "summary.json").read_bytes())
    return doc


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listing(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under a directory with its size and modification time: what "untouched" means."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


# ----- the figures' names and units


def test_every_figure_of_a_run_has_its_own_entry_in_the_table_of_units(run_dir: Path) -> None:
    """A run with an SLO and deadlines measures latencies, counts, throughput, goodput and fluidity: each is named
    by the table (no fallback), in the unit its family gives."""
    for figure in read_run(run_dir).figures:
        m = measure(figure)
        assert m.family in (*DISTRIBUTIONS.values(), *SINGLE.values()), figure.name
        if figure.unit == "ms":
            assert (m.family.base_unit.startswith("seconds"), m.family.scale) == (True, 1e-3), figure.name
    names = [f.name for f in read_run(run_dir).figures]
    assert {"goodput.fraction", "fluidity.index.p50", "fluidity.fluid_tok_s", "requests.success_rate"} <= set(names)


def test_prometheus_names_are_unique_in_base_units_and_never_counters() -> None:
    names = [measure(Figure(f"{fam}.{stat}", "", 1.0, "lower")).prometheus_name
             for fam in DISTRIBUTIONS for stat in HEADLINE_STATS]  # fmt: skip
    names += [measure(Figure(name, "", 1.0, "lower")).prometheus_name for name in SINGLE]
    assert len(set(names)) == len(names)
    assert not [n for n in names if n.endswith("_total") or "_ms" in n]
    assert measure(Figure("ttft.p99", "ms", 250.0, "lower")).prometheus_name == "infermeter_ttft_p99_seconds"
    assert measure(Figure("ttft.p99", "ms", 250.0, "lower")).prometheus_value == pytest.approx(0.25)


def test_a_figure_the_table_does_not_know_still_exports_in_base_units() -> None:
    m = measure(Figure("queue.wait.p99", "ms", 40.0, "lower"))
    assert (m.prometheus_name, m.prometheus_value, m.family.ucum) == ("infermeter_queue_wait_p99_seconds", 0.04, "ms")
    m = measure(Figure("cache.hit%", "", 0.5, "higher"))
    assert (m.prometheus_name, m.prometheus_value, m.family.ucum) == ("infermeter_cache_hitpct", 0.5, "1")


# ----- checks before a run


def test_check_exports_takes_what_can_work(tmp_path: Path) -> None:
    check_exports(
        [
            parse_export(f"prometheus:{tmp_path / 'infermeter.prom'}"),
            parse_export("otlp:http://127.0.0.1:4318"),
            parse_export("otlp:https://collector.example:443/otlp/v1/metrics"),
            parse_export("mlflow"),
        ]
    )


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("ftp://127.0.0.1:4318", "not an http(s) URL"),
        ("127.0.0.1:4318", "not an http(s) URL"),
        ("http://127.0.0.1:43x8", "port is not a number"),
        ("http://127.0.0.1:4318/v1/metrics?key=abc", "a user, query or fragment is not taken"),
        ("http://ann:s3cretpw@127.0.0.1:4318", "a user, query or fragment is not taken"),
    ],
)
def test_check_exports_refuses_an_otlp_url_that_is_not_http_host_port_path(where: str, says: str) -> None:
    with pytest.raises(UserError, match="--export otlp:") as caught:
        check_exports([ExportSpec("otlp", where)])
    message = str(caught.value)
    assert says in message and "\n" not in message and "http://127.0.0.1:4318" in message
    assert "s3cretpw" not in message


def test_check_exports_refuses_a_prometheus_file_it_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"the directory .*missing does not exist: create it"):
        check_exports([ExportSpec("prometheus", str(tmp_path / "missing" / "infermeter.prom"))])
    with pytest.raises(UserError, match="is a directory: give a file in it"):
        check_exports([ExportSpec("prometheus", str(tmp_path))])


def test_check_exports_says_how_to_install_mlflow_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(UserError, match=r"needs MLflow, which is not installed: pip install 'infermeter\[mlflow\]'"):
        check_exports([ExportSpec("mlflow")])


def test_every_exporter_kind_has_an_exporter() -> None:
    for kind in EXPORT_KINDS:
        assert callable(exporter(kind).export_run) and callable(exporter(kind).export_suite)


def test_the_otlp_endpoint_is_v1_metrics_when_the_url_gives_no_path() -> None:
    assert otlp.endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/metrics"
    assert otlp.endpoint("http://127.0.0.1:4318/") == "http://127.0.0.1:4318/v1/metrics"
    assert otlp.endpoint("https://c.example/otlp/v1/metrics") == "https://c.example/otlp/v1/metrics"


# ----- Prometheus textfile


def families(path: Path) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def one(family: Any, **labels: str) -> float:
    """The value of the one sample of a family whose labels include `labels`."""
    found = [s for s in family.samples if labels.items() <= s.labels.items()]
    assert len(found) == 1, (family.name, labels, family.samples)
    return float(found[0].value)


def test_prometheus_textfile_holds_every_figure_in_base_units(run_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "infermeter.prom"
    assert export_run([ExportSpec("prometheus", str(path))], run_dir) == []
    fams = families(path)
    s = summary_of(run_dir)
    run = read_run(run_dir)
    assert {f.type for f in fams.values()} == {"gauge"}
    assert all(f.documentation for f in fams.values())
    assert len(fams) == len(run.figures) + 1  # and when the run ended
    assert one(fams["infermeter_ttft_p99_seconds"]) == pytest.approx(s["ttft_ms"]["p99"] / 1000, rel=1e-12)
    assert one(fams["infermeter_itl_mean_seconds"]) == pytest.approx(s["itl_ms"]["mean"] / 1000, rel=1e-12)
    assert one(fams["infermeter_output_throughput_tokens_per_second"]) == s["throughput"]["output_tok_s"]
    assert one(fams["infermeter_requests"]) == REQUESTS == s["requests"]["total"]
    assert one(fams["infermeter_goodput_ratio"]) == s["goodput"]["fraction"]
    assert one(fams["infermeter_duration_seconds"]) == s["duration_s"]
    sample = fams["infermeter_ttft_p99_seconds"].samples[0]
    model = orjson.loads((run_dir / "run.json").read_bytes())["sut"]["model"]
    assert sample.labels == {"run": "sim-run", "model": model, "api": "", "kind": "simulated"}  # no API: simulated
    started = wall_ns(run.info.started_at)
    assert started is not None
    assert started / 1e9 <= one(fams["infermeter_run_end_timestamp_seconds"]) <= time.time()


def test_a_later_export_replaces_the_file_through_a_rename(run_dir: Path, suite_dir: Path, tmp_path: Path) -> None:
    """The file holds the latest run exported to it; no temporary file is left beside it for the collector."""
    path = tmp_path / "infermeter.prom"
    path.write_text("# an earlier export\nold_metric 1\n")
    assert export_run([ExportSpec("prometheus", str(path))], run_dir) == []
    assert export_run([ExportSpec("prometheus", str(path))], suite_dir / "runs" / "r1") == []
    fams = families(path)
    assert "old_metric" not in fams
    assert {s.labels["run"] for s in fams["infermeter_requests"].samples} == {"r1"}
    assert one(fams["infermeter_requests"]) == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["infermeter.prom"]
    assert oct(path.stat().st_mode & 0o777) == oct(prometheus.FILE_MODE)


def test_prometheus_label_values_are_escaped(run_dir: Path) -> None:
    run = read_run(run_dir)
    odd = 'a "quoted" \\ model\non two lines'
    info = run.info.model_copy(update={"sut": run.info.sut.model_copy(update={"model": odd})})
    text = prometheus.render(prometheus.run_series(FinishedRun(run.run_dir, info, run.summary, run.figures, 1)))
    assert '\\"quoted\\" \\\\ model\\non two lines' in text
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert parsed["infermeter_requests"].samples[0].labels["model"] == odd


def test_a_disk_that_refuses_the_file_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(ExportFailed, match=r"cannot be written \(No space left on device\)"):
        prometheus.write_atomically(tmp_path / "infermeter.prom", "x 1\n")
    assert list(tmp_path.iterdir()) == []


# ----- OTLP/HTTP


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}


def test_otlp_sends_a_gauge_per_figure_that_opentelemetrys_schema_parses(run_dir: Path) -> None:
    s = summary_of(run_dir)
    run = read_run(run_dir)
    with otlp_receiver() as receiver:
        assert export_run([ExportSpec("otlp", receiver.url)], run_dir) == []
    [got] = receiver.received
    assert (got.path, got.error, got.headers["content-type"]) == ("/v1/metrics", None, "application/json")
    assert got.request is not None
    [rm] = got.request.resource_metrics
    resource = attrs(rm.resource.attributes)
    assert resource["service.name"] == "infermeter"
    assert (resource["infermeter.run.name"], resource["infermeter.run.kind"]) == ("sim-run", "simulated")
    assert resource["infermeter.sut.model"] == run.model and "infermeter.api" not in resource  # none for a simulation
    [scope] = rm.scope_metrics
    metrics = {m.name: m for m in scope.metrics}
    assert list(metrics) == [f"infermeter.{f.name}" for f in run.figures]

    def value(name: str) -> float:
        [point] = metrics[name].gauge.data_points
        return float(point.as_double)

    assert value("infermeter.ttft.p99") == s["ttft_ms"]["p99"] and metrics["infermeter.ttft.p99"].unit == "ms"
    assert value("infermeter.duration") == s["duration_s"] and metrics["infermeter.duration"].unit == "s"
    assert value("infermeter.throughput.output_tok_s") == s["throughput"]["output_tok_s"]
    assert metrics["infermeter.throughput.output_tok_s"].unit == "{token}/s"
    assert value("infermeter.goodput.fraction") == s["goodput"]["fraction"]
    assert metrics["infermeter.goodput.fraction"].unit == "1"
    assert value("infermeter.requests.total") == REQUESTS
    [end] = {p.time_unix_nano for m in metrics.values() for p in m.gauge.data_points}  # the run's end, for all
    started = wall_ns(run.info.started_at)
    assert started is not None and started + s["duration_s"] * 1e9 >= end >= started  # the virtual clock ran ahead
    assert end <= time.time_ns()  # of the wall clock: the end is now


def test_otlp_headers_come_from_opentelemetrys_variable(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc%20def,x-team=bench")
    monkeypatch.setattr(secrets, "_known", set())  # what this test registers stays in it
    with otlp_receiver() as receiver:
        assert export_run([ExportSpec("otlp", receiver.url + "/custom/path")], run_dir) == []
    [got] = receiver.received
    assert (got.path, got.headers["x-api-key"], got.headers["x-team"]) == ("/custom/path", "abc def", "bench")
    # the credential is masked wherever a message could show it; a plain header's value is not a secret
    assert secrets.redact("key abc def, team bench") == "key [REDACTED], team bench"


def test_a_receiver_answering_500_gives_one_warning_line(run_dir: Path) -> None:
    before = listing(run_dir)
    with otlp_receiver(status=500, answer=b"collector broke\n") as receiver:
        warnings = export_run([ExportSpec("otlp", receiver.url)], run_dir)
    assert len(receiver.received) == 1
    assert warnings == [
        f"--export otlp:{receiver.url} failed: {receiver.url}/v1/metrics answered HTTP 500 Internal Server Error: "
        "collector broke"
    ]
    assert listing(run_dir) == before


def test_a_receiver_rejecting_data_points_gives_one_warning_line(run_dir: Path) -> None:
    answer = b'{"partialSuccess": {"rejectedDataPoints": "3", "errorMessage": "too old"}}'
    with otlp_receiver(answer=answer) as receiver:
        [warning] = export_run([ExportSpec("otlp", receiver.url)], run_dir)
    assert warning.endswith("/v1/metrics rejected 3 data point(s): too old")


def test_a_receiver_that_is_down_gives_one_warning_line_and_credentials_stay_hidden(run_dir: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    [warning] = export_run([ExportSpec("otlp", url)], run_dir)
    assert warning.startswith(f"--export otlp:{url} failed: cannot reach {url}/v1/metrics (")
    assert "\n" not in warning
    [warning] = export_run([ExportSpec("otlp", f"http://ann:s3cretpw@127.0.0.1:{closed_port()}")], run_dir)
    assert "s3cretpw" not in warning and "[REDACTED]@127.0.0.1" in warning


# ----- MLflow (its file store, read back with MlflowClient)


def mlflow_client(uri: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return MlflowClient(tracking_uri=uri)


def artifacts(client: Any, run_id: str) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id)}


def test_mlflow_logs_params_metrics_and_the_report(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    store = tmp_path / "mlruns"
    assert export_run([ExportSpec("mlflow", str(store))], run_dir) == []
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # set for the export only
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    client = mlflow_client(store.as_uri(), monkeypatch)
    experiment = client.get_experiment_by_name("infermeter")
    [logged] = client.search_runs([experiment.experiment_id])
    assert (logged.info.run_name, logged.info.status) == ("sim-run", "FINISHED")
    s = summary_of(run_dir)
    metrics = logged.data.metrics
    assert metrics == {f.column: f.value for f in read_run(run_dir).figures}
    assert metrics["ttft_p99_ms"] == s["ttft_ms"]["p99"]
    assert metrics["throughput_output_tok_s"] == s["throughput"]["output_tok_s"]
    assert metrics["goodput_fraction"] == s["goodput"]["fraction"]
    assert metrics["requests_total"] == REQUESTS
    params = logged.data.params
    info = orjson.loads((run_dir / "run.json").read_bytes())
    assert params["kind"] == "simulated" and params["sut.model"] == info["sut"]["model"]
    assert params["load.requests"] == str(REQUESTS) and params["deadlines"] == DEADLINES
    assert params["engine.config.scheduler.name"] == info["engine"]["config"]["scheduler"]["name"]
    assert params["slo.ttft"] == str(info["slo"]["ttft"])
    assert logged.data.tags["infermeter.kind"] == "simulated" and "infermeter.version" in logged.data.tags
    assert artifacts(client, logged.info.run_id) == {"run.json", "summary.json", "report.html"}
    html = Path(client.download_artifacts(logged.info.run_id, "report.html", str(tmp_path))).read_text()
    assert "infermeter run report: sim-run" in html


def test_mlflow_takes_the_experiment_from_mlflows_variable(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "capacity-planning")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(tmp_path / "store"))  # the URI when --export mlflow gives none
    assert export_run([ExportSpec("mlflow")], run_dir) == []
    client = mlflow_client((tmp_path / "store").as_uri(), monkeypatch)
    assert client.get_experiment_by_name("infermeter") is None
    experiment = client.get_experiment_by_name("capacity-planning")
    assert len(client.search_runs([experiment.experiment_id])) == 1


def test_mlflow_params_are_the_resolved_configuration_flattened_within_mlflows_limits(run_dir: Path) -> None:
    run = read_run(run_dir)
    config = {
        "target": {"api": "chat", "url": "http://ann:s3cretpw@127.0.0.1:8000", "header": None},
        "load": {"rate": 20.0, "arrival": "poisson", "model_mix": {"a": 0.5}},
        "workload": {"seed": 42, "multi_turn": False, "classes": [1, 2]},
    }
    live = FinishedRun(run.run_dir, run.info.model_copy(update={"config": config}), run.summary, run.figures, 1)
    params = mlflow_run.run_params(live)
    assert params["target.api"] == "chat" and params["load.rate"] == "20.0" and params["load.model_mix.a"] == "0.5"
    workload = (params["workload.seed"], params["workload.multi_turn"], params["workload.classes"])
    assert workload == ("42", "false", "[1,2]")
    assert "target.header" not in params and "s3cretpw" not in params["target.url"]
    assert "engine.config.scheduler.name" not in params  # the configuration replaces the simulation's blocks
    long = mlflow_run.limited({"k" * 300: "v" * 7000, "a:b%c": "x"})
    [(key, value), odd] = long.items()
    assert (len(key), len(value)) == (250, 6000)
    assert key.endswith(mlflow_run.TRUNCATED) and value.endswith(mlflow_run.TRUNCATED)
    assert odd == ("a_b_c", "x")


def test_an_mlflow_server_that_is_down_gives_one_warning_line(run_dir: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    [warning] = export_run([ExportSpec("mlflow", url)], run_dir)
    assert warning.startswith(f"--export mlflow:{url} failed: ") and "\n" not in warning
    assert time.monotonic() - started < 60  # not MLflow's default minutes of retries


# ----- a suite


def test_a_suite_goes_to_every_exporter(suite_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, store = tmp_path / "suite.prom", tmp_path / "mlruns"
    with otlp_receiver() as receiver:
        specs = [
            ExportSpec("prometheus", str(path)),
            ExportSpec("otlp", receiver.url),
            ExportSpec("mlflow", f"{store}"),
        ]
        assert export_suite(specs, suite_dir) == []
    r1, r2 = (summary_of(suite_dir / "runs" / key) for key in ("r1", "r2"))

    fams = families(path)  # Prometheus: the verdict, the suite's figures in its units, every run present
    assert one(fams["infermeter_suite_verdict"], verdict="conditionally compliant", suite="suite-x") == 1
    # one metric per base unit, so that no metric mixes units; words and flags are not figures
    rate, seconds = fams["infermeter_suite_figure_tokens_per_second"], fams["infermeter_suite_figure_seconds"]
    assert one(rate, figure="max_output_tok_s") == 1234.5
    assert one(seconds, figure="ttft_p99_ms_30%") == pytest.approx(0.25)
    assert len(rate.samples) == len(seconds.samples) == 1 and "infermeter_suite_figure" not in fams
    requests = fams["infermeter_requests"]
    assert {s.labels["run"]: s.value for s in requests.samples} == {"r1": 40, "r2": 40}
    assert {s.labels["suite"] for s in requests.samples} == {"suite-x"}
    assert one(fams["infermeter_ttft_p99_seconds"], run="r2") == pytest.approx(r2["ttft_ms"]["p99"] / 1000)

    [got] = receiver.received  # OTLP: the suite's resource, then one per run present
    assert got.error is None and got.request is not None
    suite_rm, *run_rms = got.request.resource_metrics
    assert attrs(suite_rm.resource.attributes)["infermeter.suite.test"] == "tradeoff"
    suite_metrics = {m.name: m for m in suite_rm.scope_metrics[0].metrics}
    verdict = suite_metrics["infermeter.suite.verdict"].gauge.data_points[0]
    assert attrs(verdict.attributes) == {"verdict": "conditionally compliant"}
    assert suite_metrics["infermeter.suite.ttft_p99_ms_30pct"].unit == "ms"
    assert suite_metrics["infermeter.suite.max_output_tok_s"].gauge.data_points[0].as_double == 1234.5
    assert [attrs(rm.resource.attributes)["infermeter.run.name"] for rm in run_rms] == ["r1", "r2"]

    client = mlflow_client(store.as_uri(), monkeypatch)  # MLflow: a parent run, a nested run per run present
    experiment = client.get_experiment_by_name("infermeter").experiment_id
    [parent] = client.search_runs([experiment], "tags.`infermeter.kind` = 'suite'")
    assert parent.info.run_name == "suite-x" and parent.data.params["verdict"] == "conditionally compliant"
    assert parent.data.metrics == {"max_output_tok_s": 1234.5, "ttft_p99_ms_30pct": 250.0}
    assert parent.data.params["params.capacity"] == "20.0" and parent.data.params["test"] == "tradeoff"
    assert artifacts(client, parent.info.run_id) == {"suite.json", "report.html"}
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    by_name = {c.info.run_name: c for c in children}
    assert set(by_name) == {"r1", "r2"}
    assert by_name["r1"].data.metrics["ttft_p99_ms"] == r1["ttft_ms"]["p99"]
    assert artifacts(client, by_name["r2"].info.run_id) == {"run.json", "summary.json"}


def test_a_suite_end_is_when_it_finished(suite_dir: Path) -> None:
    suite = read_suite(suite_dir)
    finished = wall_ns(suite.result.finished_at)
    assert finished is not None and abs(suite.end_ns - finished) < 1_000_000  # suite.json keeps milliseconds
    assert [key for key, _ in suite.runs] == ["r1", "r2"]


# ----- failures are warnings, one line per exporter


def test_a_run_that_cannot_be_read_gives_each_exporter_a_warning(tmp_path: Path) -> None:
    specs = [ExportSpec("prometheus", str(tmp_path / "x.prom")), ExportSpec("otlp", "http://127.0.0.1:9")]
    warnings = export_run(specs, tmp_path / "no-such-run")
    assert len(warnings) == 2
    assert warnings[0].startswith(f"--export prometheus:{tmp_path / 'x.prom'} failed: ")
    assert all("is not a run directory: it has no run.json" in w for w in warnings)
    assert not (tmp_path / "x.prom").exists()
    assert export_run([], tmp_path / "no-such-run") == []


def test_only_the_failed_exporter_warns_and_the_run_directory_is_untouched(run_dir: Path, tmp_path: Path) -> None:
    before = listing(run_dir)
    path = tmp_path / "ok.prom"
    specs = [ExportSpec("otlp", f"http://127.0.0.1:{closed_port()}"), ExportSpec("prometheus", str(path))]
    [warning] = export_run(specs, run_dir)
    assert warning.startswith("--export otlp:") and path.is_file()
    assert listing(run_dir) == before


def test_an_unexpected_error_is_one_line_with_its_type_and_no_secret() -> None:
    text = why(RuntimeError("boom with sk-abcdefghijkl in it\nsecond line\n" + "x" * 500))
    assert text == "RuntimeError: boom with [REDACTED] in it"
    assert len(why(RuntimeError("y" * 1000))) < 350
    assert why(ExportFailed("plain")) == "plain"


def test_values_that_are_not_finite_are_written_as_each_format_spells_them() -> None:
    series = [prometheus.Series("m", "h", {}, math.nan), prometheus.Series("m", "h", {}, -math.inf)]
    assert prometheus.render(series) == "# HELP m h\n# TYPE m gauge\nm NaN\nm -Inf\n"
    point = otlp_metrics.gauge("m", "1", "d", math.inf, 5)["gauge"]["dataPoints"][0]
    assert point == {"timeUnixNano": "5", "asDouble": "Infinity"}


# ----- through the CLI


def test_sim_with_export_writes_the_textfile(tmp_path: Path) -> None:
    """`infermeter sim ... --export prometheus:FILE` (the option as `run`, `sim` and `test` take it)."""
    path = tmp_path / "infermeter.prom"
    out = tmp_path / "run"
    assert exit_code(["sim", "--requests", "30", "--out", str(out), "--export", f"prometheus:{path}"]) == 0
    assert one(families(path)["infermeter_requests"], run="run") == 30


def test_sim_with_an_export_that_cannot_work_measures_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    bad = f"prometheus:{tmp_path / 'missing' / 'x.prom'}"
    assert exit_code(["sim", "--requests", "30", "--out", str(out), "--export", bad]) == 2
    assert not out.exists()


def test_sim_with_an_export_that_fails_at_the_end_warns_and_keeps_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{closed_port()}"
    assert exit_code(["sim", "--requests", "30", "--out", str(out), "--export", f"otlp:{url}"]) == 0
    err = capsys.readouterr().err
    assert f"warning: --export otlp:{url} failed: cannot reach {url}/v1/metrics (" in err
    assert (out / "summary.json").is_file()


def test_a_textfile_directory_gone_by_the_end_of_the_run_is_a_warning(run_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "gone" / "infermeter.prom"
    [warning] = export_run([ExportSpec("prometheus", str(path))], run_dir)
    assert warning == f"--export prometheus:{path} failed: {path} cannot be written (No such file or directory)"
    assert export_run([ExportSpec("prometheus")], run_dir) == [
        "--export prometheus failed: no file given: --export prometheus:FILE"
    ]
