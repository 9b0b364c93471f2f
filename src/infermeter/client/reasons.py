"""The vocabulary of request failures: a record's error is "<reason>: <detail>", and summaries count by reason."""

from __future__ import annotations

CANNOT_CONNECT = "cannot connect"
CONNECT_TIMEOUT = "connect timeout"
CLOSED_BEFORE_RESPONSE = "connection closed before the response"
LOST_MID_STREAM = "connection lost mid-stream"
UNFINISHED = "stream ended before its final chunk"  # no finish_reason, no usage chunk: a cut reply
MALFORMED_SSE = "malformed SSE"
INVALID_JSON = "invalid JSON event"
MALFORMED_EVENT = "malformed event"
SERVER_ERROR_EVENT = "server error event"
FIRST_TOKEN_TIMEOUT = "first-token timeout"
TOTAL_TIMEOUT = "total timeout"
CANCELLED = "cancelled"
CLIENT_ERROR = "client error"
MALFORMED_HTTP = "malformed HTTP response"
REJECTED_FIELD = "the server rejects the field"  # a 400/422 detail's hint: the field, then the option that sends it
CLIENT_LIMIT = "client out of file descriptors"  # the load generator's host, not the server
# replies that are one JSON body (embeddings, rerank)
INVALID_JSON_REPLY = "invalid JSON reply"
MALFORMED_REPLY = "malformed reply"  # valid JSON, but not the API's shape
REPLY_TOO_LARGE = "reply too large"  # beyond what the client holds of one body
WRONG_COUNT = "wrong number of results"  # embeddings or rerank results other than one per input sent


def http(status: int) -> str:
    """HTTP failures are counted per status code: 'HTTP 429', 'HTTP 503'."""
    return f"HTTP {status}"


def grpc_status(code: str) -> str:
    """gRPC failures are counted per status code, as HTTP ones: 'gRPC RESOURCE_EXHAUSTED', 'gRPC UNAUTHENTICATED'."""
    return f"gRPC {code}"
