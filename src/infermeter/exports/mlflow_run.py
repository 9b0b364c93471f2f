"""`--export mlflow[:URI]`: a run as an MLflow run (params from run.json, metrics from summary.json's headline
figures, run.json, summary.json and the HTML report as artifacts); a suite as a parent run with its verdict, figures
and report, and a nested run per run (params, metrics, run.json and summary.json: the suite's report covers them).

The tracking URI is URI, else $MLFLOW_TRACKING_URI, else ./mlruns (MLflow's own default now needs a database).  MLflow
3 refuses a file store unless MLFLOW_ALLOW_FILE_STORE=true: it is set, for the export only, when the URI is a path or
file: URI.  The experiment is $MLFLOW_EXPERIMENT_NAME, else "infermeter".  MLflow is an optional extra
(`pip install 'infermeter[mlflow]'`), imported only here, inside the functions."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from infermeter import __version__, secrets
from infermeter.catalog.columns import flatten
from infermeter.errors import UserError
from infermeter.exports.finished import FinishedRun, FinishedSuite
from infermeter.exports.measures import sanitize
from infermeter.records import RUN_JSON, SUMMARY
from infermeter.suite_result import SUITE_JSON

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

DEFAULT_URI = "mlruns"  # beside the working directory, as MLflow's file store always was
DEFAULT_EXPERIMENT = "infermeter"
EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"  # MLflow's own variable for the experiment
REPORT = "report.html"
TRUNCATED = "...[truncated]"
# a tracking server that is down fails the export after these, not after MLflow's minutes of retries (the user's
# own settings of these variables win)
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
INSTALL = "pip install 'infermeter[mlflow]'"


def check(where: str | None) -> None:
    """Before a run: MLflow must be installed (any tracking URI is MLflow's to judge)."""
    import importlib.util

    if importlib.util.find_spec("mlflow") is None:
        raise UserError(f"--export mlflow needs MLflow, which is not installed: {INSTALL}")


def tracking_uri(where: str | None) -> str:
    """The tracking URI: WHERE, else $MLFLOW_TRACKING_URI, else ./mlruns; a path becomes an absolute file: URI."""
    uri = where or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    if is_file_store(uri) and not uri.lower().startswith("file:"):
        return Path(uri).expanduser().resolve().as_uri()
    return uri


def is_file_store(uri: str) -> bool:
    """A plain path or a file: URI (MLflow's file store), not a server or database URI."""
    scheme = urlsplit(uri).scheme.lower()
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter reads as a scheme


@contextlib.contextmanager
def _environment(uri: str) -> Iterator[None]:
    """MLflow's variables for the export's duration: the file store allowed (for a file store), short HTTP retries
    (unless the user set them); the process's own values back afterwards."""
    wanted = {k: v for k, v in HTTP_DEFAULTS.items() if k not in os.environ}
    if is_file_store(uri):
        wanted["MLFLOW_ALLOW_FILE_STORE"] = "true"
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def params_of(tree: Mapping[str, Any]) -> dict[str, str]:
    """A JSON-like tree as MLflow params: dotted keys (catalog.columns.flatten, as the `runs` table names them with
    underscores) and text values (`load.rate` -> "20.0"); None and empty mappings are left out, a list is one
    value (as JSON), credentials in text are masked."""
    out = {}
    for key, value in flatten(tree, sep=".").items():
        if value is None or value == {}:
            continue
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        out[key] = secrets.redact_url(text) if "://" in text else secrets.redact(text)
    return out


def run_params(run: FinishedRun) -> dict[str, str]:
    """run.json's resolved configuration flattened (`load.rate`, `target.api`, ...), or, for a run without one (a
    simulation), its workload, load, engine and objectives blocks; plus the SUT and the run's kind."""
    info = run.info
    if info.config is not None:
        source: dict[str, Any] = dict(info.config)
    else:
        blocks = {"workload": info.workload, "load": info.load, "engine": info.engine}
        source = {k: b.model_dump(mode="json", exclude_none=True) for k, b in blocks.items() if b is not None}
        source |= {"slo": dict(info.slo), "deadlines": info.deadlines}
    source["sut"] = info.sut.model_dump(mode="json", exclude_none=True)
    return {**params_of(source), "kind": info.kind, "itl_option": info.itl_option}


def suite_params(suite: FinishedSuite) -> dict[str, str]:
    """A suite's parameters (suite.json's params) and what it is: the test, its section, quick or not, the command."""
    r = suite.result
    about = {"test": r.suite, "section": r.section, "reference": r.reference, "quick": r.quick, "command": r.command}
    return params_of({**about, "params": r.params})


def limited(params: Mapping[str, str]) -> dict[str, str]:
    """Params within MLflow's limits: a key of its characters and length, a value of its length, each cut visibly
    (`...[truncated]`) where it is longer."""
    from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH, MAX_PARAM_VAL_LENGTH

    out = {}
    for key, value in params.items():
        k = re.sub(r"[^\w.\- ]", "_", key)
        if len(k) > MAX_ENTITY_KEY_LENGTH:
            k = k[: MAX_ENTITY_KEY_LENGTH - len(TRUNCATED)] + TRUNCATED
        if len(value) > MAX_PARAM_VAL_LENGTH:
            value = value[: MAX_PARAM_VAL_LENGTH - len(TRUNCATED)] + TRUNCATED
        out[k] = value
    return out


def _log(
    client: MlflowClient,
    run_id: str,
    params: Mapping[str, str],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    end_ns: int,
) -> None:
    """Params, metrics and tags in batches of MLflow's sizes."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

    at_ms = end_ns // 1_000_000
    param_list = [Param(k, v) for k, v in limited(params).items()]
    tag_list = [RunTag(k, v) for k, v in tags.items()]
    metric_list = [Metric(k, v, at_ms, 0) for k, v in metrics.items()]
    for i in range(0, len(param_list), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, params=param_list[i : i + MAX_PARAMS_TAGS_PER_BATCH])
    for i in range(0, len(tag_list), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, tags=tag_list[i : i + MAX_PARAMS_TAGS_PER_BATCH])
    for i in range(0, len(metric_list), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metric_list[i : i + MAX_METRICS_PER_BATCH])


def _tags(kind: str) -> dict[str, str]:
    return {"infermeter.version": __version__, "infermeter.kind": kind}


def _experiment(client: MlflowClient) -> str:
    """The experiment's id, the experiment made when it does not exist yet."""
    name = os.environ.get(EXPERIMENT_VARIABLE) or DEFAULT_EXPERIMENT
    found = client.get_experiment_by_name(name)
    return found.experiment_id if found is not None else client.create_experiment(name)


@contextlib.contextmanager
def _mlflow_run(client: MlflowClient, experiment: str, name: str, parent: str | None = None) -> Iterator[str]:
    """An MLflow run, FINISHED when the block completes and FAILED when it raises (then re-raised)."""
    tags = {"mlflow.parentRunId": parent} if parent is not None else None
    run_id: str = client.create_run(experiment, run_name=name, tags=tags).info.run_id
    try:
        yield run_id
    except BaseException:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")


def _log_run(
    client: MlflowClient, experiment: str, run: FinishedRun, report: bool, parent: str | None, name: str
) -> None:
    """One run: params, metrics, tags, run.json and summary.json, and its HTML report when `report`."""
    with _mlflow_run(client, experiment, name, parent) as run_id:
        metrics = {f.column: f.value for f in run.figures}
        tags = {**_tags(run.info.kind), "infermeter.run_dir": str(run.run_dir.resolve())}
        _log(client, run_id, run_params(run), metrics, tags, run.end_ns)
        for file in (RUN_JSON, SUMMARY):
            client.log_artifact(run_id, str(run.run_dir / file))
        if report:
            with tempfile.TemporaryDirectory(prefix="infermeter-mlflow-") as tmp:
                client.log_artifact(run_id, str(run_report(run, Path(tmp) / REPORT)))


def run_report(run: FinishedRun, path: Path) -> Path:
    """The run's HTML report, as `infermeter report RUN --html` writes it, at `path`."""
    from infermeter.metrics import RecordColumns
    from infermeter.report.documents import run_document
    from infermeter.report.html import write_report

    cols = RecordColumns.of_run(run.run_dir, run.info)
    write_report(run_document(run.run_dir, run.info, run.summary, cols), path)
    return path


def suite_report(suite: FinishedSuite, path: Path) -> Path:
    """The suite's HTML report, as `infermeter report SUITE_DIR --html` writes it, at `path`."""
    from infermeter.report.documents import suite_document
    from infermeter.report.html import write_report

    write_report(suite_document(suite.result, suite.infos), path)
    return path


def export_run(run: FinishedRun, where: str | None) -> None:
    """The run as an MLflow run named after its directory."""
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(where)
    with _environment(uri):
        client = MlflowClient(tracking_uri=uri)
        _log_run(client, _experiment(client), run, True, None, run.name)


def export_suite(suite: FinishedSuite, where: str | None) -> None:
    """The suite as a parent MLflow run named after its directory, each run nested in it under its key."""
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(where)
    with _environment(uri):
        client = MlflowClient(tracking_uri=uri)
        experiment = _experiment(client)
        with _mlflow_run(client, experiment, suite.name) as parent:
            metrics = {sanitize(name): value for name, (value, _) in suite.figures.items()}
            tags = {
                **_tags("suite"),
                "infermeter.verdict": suite.result.verdict,
                "infermeter.suite_dir": str(suite.suite_dir.resolve()),
            }
            _log(client, parent, {**suite_params(suite), "verdict": suite.result.verdict}, metrics, tags, suite.end_ns)
            client.log_artifact(parent, str(suite.suite_dir / SUITE_JSON))
            with tempfile.TemporaryDirectory(prefix="infermeter-mlflow-") as tmp:
                client.log_artifact(parent, str(suite_report(suite, Path(tmp) / REPORT)))
            for key, run in suite.runs:
                _log_run(client, experiment, run, False, parent, key)
