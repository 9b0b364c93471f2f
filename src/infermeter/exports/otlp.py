"""`--export otlp:URL`: a run's (or a suite's) headline figures as OpenTelemetry metrics over OTLP/HTTP, JSON-encoded
(otlp_metrics builds the message), POSTed to URL/v1/metrics when the URL gives no path.

Written with orjson and sent with the standard library (no OpenTelemetry SDK at run time).  Headers for a collector
that wants them (an API key) come from OpenTelemetry's own variables, OTEL_EXPORTER_OTLP_METRICS_HEADERS or
OTEL_EXPORTER_OTLP_HEADERS ("key=value,key2=value2", values URL-encoded); HTTP(S)_PROXY and NO_PROXY apply."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

import orjson

from infermeter import secrets
from infermeter.errors import UserError
from infermeter.exports.failure import ExportFailed
from infermeter.exports.finished import FinishedRun, FinishedSuite
from infermeter.exports.otlp_metrics import Json, run_request, suite_request

METRICS_PATH = "/v1/metrics"  # OTLP/HTTP's path for metrics when the URL gives none
TIMEOUT_S = 10.0
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")


def endpoint(url: str) -> str:
    """Where the metrics are posted: URL + /v1/metrics when the URL has no path, else the URL as given; a URL not of
    the form http(s)://host[:port][/path] is a one-line UserError."""
    shown = secrets.redact_url(url)
    form = "give http(s)://host[:port][/path], e.g. --export otlp:http://127.0.0.1:4318"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise UserError(f"--export otlp:{shown}: not a URL (its port is not a number): {form}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UserError(f"--export otlp:{shown}: not an http(s) URL with a host: {form}")
    if parts.username is not None or parts.query or parts.fragment:
        raise UserError(
            f"--export otlp:{shown}: a user, query or fragment is not taken ({form}); give credentials in "
            "OTEL_EXPORTER_OTLP_HEADERS"
        )
    path = parts.path if parts.path.strip("/") else METRICS_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The extra headers OpenTelemetry's variables give (the metrics-specific one first), a credential-like one's
    value (Authorization, X-Api-Key, ...) remembered as a secret so that no message shows it."""
    env = os.environ if environ is None else environ
    text = next((env[v] for v in HEADER_VARIABLES if env.get(v, "").strip()), "")
    out = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            name, given = unquote(key.strip()), unquote(value.strip())
            if secrets.sensitive_header(name):
                secrets.register_header_value(given)
            out[name] = given
    return out


def post(url: str, request: Json) -> None:
    """POST the request to the endpoint; ExportFailed when the receiver is down, answers other than 2xx, or says
    it rejected data points (OTLP's partial success)."""
    where = endpoint(url)
    shown = secrets.redact_url(where)
    body = orjson.dumps(request)
    req = urllib.request.Request(
        where, data=body, method="POST", headers={**headers(), "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", "replace").strip().splitlines()
        said = f": {secrets.redact(detail[0])}" if detail else ""
        raise ExportFailed(f"{shown} answered HTTP {exc.code} {exc.reason}{said}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ExportFailed(f"cannot reach {shown} ({secrets.redact(str(reason))})") from None
    _check_partial_success(answer, shown)


def _check_partial_success(answer: bytes, shown: str) -> None:
    """An OTLP receiver that took the request but rejected some data points says so in its answer."""
    try:
        doc = orjson.loads(answer) if answer.strip() else {}
    except orjson.JSONDecodeError:
        return  # a protobuf or empty answer: nothing rejected that it tells in JSON
    partial = doc.get("partialSuccess") if isinstance(doc, dict) else None
    if not isinstance(partial, dict):
        return
    rejected = int(partial.get("rejectedDataPoints") or 0)
    if rejected:
        message = secrets.redact(str(partial.get("errorMessage") or "no reason given"))
        raise ExportFailed(f"{shown} rejected {rejected} data point(s): {message}")


def check(where: str | None) -> None:
    """Before a run: the URL must be of the form http(s)://host[:port][/path]."""
    endpoint(where or "")


def export_run(run: FinishedRun, where: str | None) -> None:
    """Send a run's figures."""
    post(where or "", run_request(run))


def export_suite(suite: FinishedSuite, where: str | None) -> None:
    """Send a suite's figures and its runs'."""
    post(where or "", suite_request(suite))
