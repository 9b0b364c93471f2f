"""A local OTLP/HTTP metrics receiver for the tests: binds 127.0.0.1 on a free port, parses every body it is sent with
OpenTelemetry's own schema (`ExportMetricsServiceRequest`, strict: a field the schema does not have fails), and
answers with the status it was told to."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest


@dataclass
class Received:
    """What one POST carried: its path, its headers (names in lower case), and its body parsed (None when it did not
    parse, with the parser's error)."""

    path: str
    headers: dict[str, str]
    request: ExportMetricsServiceRequest | None
    error: str | None = None


@dataclass
class Receiver:
    """The receiver's address and everything it was sent."""

    url: str
    status: int
    answer: bytes
    received: list[Received] = field(default_factory=list)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                parsed: ExportMetricsServiceRequest | None = json_format.Parse(body, ExportMetricsServiceRequest())
                error = None
            except json_format.ParseError as exc:
                parsed, error = None, str(exc)
            headers = {k.lower(): v for k, v in self.headers.items()}
            receiver.received.append(Received(self.path, headers, parsed, error))
            self.send_response(receiver.status)
            self.send_header("Content-Type", "application/json" if receiver.status == 200 else "text/plain")
            self.send_header("Content-Length", str(len(receiver.answer)))
            self.end_headers()
            self.wfile.write(receiver.answer)

        def log_message(self, format: str, *args: object) -> None:  # quiet: the tests read `received`
            pass

    return Handler


@contextmanager
def otlp_receiver(status: int = 200, answer: bytes = b"{}") -> Iterator[Receiver]:
    """A receiver running for the block's duration, answering every POST with `status` and `answer`."""
    receiver = Receiver("", status, answer)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
