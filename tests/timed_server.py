"""A streaming server that writes every token at a known instant and keeps the truth, fast enough for 2,000 req/s.

A bare asyncio protocol (HTTP/1.1 keep-alive, chunked SSE, uvloop) on its own core: a request's first token is due
`--ttft` after its body was read, then one every `--gap` seconds, `max_tokens` of them (at most `--tokens`).  One
loop spins over a heap of due writes, so every write leaves within microseconds of its instant; the server stamps
time.perf_counter() (CLOCK_MONOTONIC, shared by every process) when it read each request and just before each token
write.  Each request also carries the kernel's receive timestamp of its last segment (SO_TIMESTAMPNS): on loopback
the kernel stamps a segment inside the sender's write call, so it is when the request left the client, free of this
server's own loop turns.  On SIGTERM it saves that truth to `--truth FILE` (.npz: the prompt's crc32, read time,
wire time, write times) and exits.

Run as `python -m tests.timed_server --truth FILE`; it prints "listening on PORT".
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import signal
import socket
import struct
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from infermeter.records import RunClock

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
MODELS = orjson.dumps({"object": "list", "data": [{"id": "timed", "object": "model"}]})
EVENT = b'data: {"id":"cmpl-1","object":"text_completion","created":0,"model":"timed","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}]}\n\n'  # noqa: E501
OK_JSON = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
TOKEN = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)
SO_TIMESTAMPNS = 35  # Linux: SO_TIMESTAMPNS and its control message SCM_TIMESTAMPNS (not exported by `socket`)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@dataclass
class Stream:
    """One request's reply in progress, and its truth."""

    transport: Connection
    key: int
    read_at: float
    wire_at: float
    tokens: int
    prompt_tokens: int
    writes: list[float] = field(default_factory=list)


class Server:
    """The due writes of every stream, and the truth of every finished one."""

    def __init__(self, ttft: float, gap: float, max_tokens: int) -> None:
        self.ttft, self.gap, self.max_tokens = ttft, gap, max_tokens
        self.due: list[tuple[float, int, Stream]] = []
        self.serial = 0
        self.done: list[Stream] = []
        self.late: list[float] = []  # write stamp - due time, every token

    def start(self, transport: Connection, body: bytes, read_at: float, wire_at: float) -> None:
        req = orjson.loads(body)
        prompt = req.get("prompt") or req["messages"][-1]["content"]
        n = max(1, min(int(req.get("max_tokens") or self.max_tokens), self.max_tokens))
        stream = Stream(transport, zlib.crc32(prompt.encode()), read_at, wire_at, n, len(prompt.split()))
        transport.write(HEAD)
        self._push(read_at + self.ttft, stream)

    def _push(self, at: float, stream: Stream) -> None:
        self.serial += 1
        heapq.heappush(self.due, (at, self.serial, stream))

    def write_due(self) -> None:
        due, perf = self.due, time.perf_counter
        while due and due[0][0] <= perf():
            at, _, stream = heapq.heappop(due)
            if stream.transport.is_closing():
                continue
            now = perf()
            stream.transport.write(TOKEN)
            stream.writes.append(now)
            self.late.append(now - at)
            if len(stream.writes) < stream.tokens:
                self._push(at + self.gap, stream)
            else:
                usage = {"prompt_tokens": stream.prompt_tokens, "completion_tokens": stream.tokens}
                tail = b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\ndata: [DONE]\n\n"
                stream.transport.write(_chunk(tail) + b"0\r\n\r\n")
                self.done.append(stream)

    def save(self, path: Path) -> None:
        k = self.max_tokens
        writes = np.full((len(self.done), k), np.nan)
        for i, s in enumerate(self.done):
            writes[i, : len(s.writes)] = s.writes
        np.savez(
            path,
            key=np.array([s.key for s in self.done], dtype=np.uint32),
            read_at=np.array([s.read_at for s in self.done]),
            wire_at=np.array([s.wire_at for s in self.done]),
            writes=writes,
            late=np.array(self.late),
        )


class Connection:
    """HTTP/1.1 keep-alive on a raw socket (recvmsg, for the kernel's receive timestamp): a POST with Content-Length
    starts a stream; GET /v1/models answers the model."""

    def __init__(self, server: Server, sock: socket.socket, offset: float) -> None:
        self.server, self.sock, self.offset = server, sock, offset
        self.loop = asyncio.get_running_loop()
        self.buf = b""
        self.out = bytearray()  # what the socket did not take yet
        self.closed = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.loop.add_reader(sock.fileno(), self.readable)

    def is_closing(self) -> bool:
        return self.closed

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.out:
            try:
                data = data[self.sock.send(data) :]
            except BlockingIOError:
                pass
            except OSError:
                self.close()
                return
            if not data:
                return
            self.loop.add_writer(self.sock.fileno(), self.writable)
        self.out += data

    def writable(self) -> None:
        try:
            del self.out[: self.sock.send(self.out)]
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        if not self.out:
            self.loop.remove_writer(self.sock.fileno())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
            self.sock.close()

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, 64)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        read_at = time.perf_counter()
        if not data:
            self.close()
            return
        wire_at = read_at
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                wire_at = sec + nsec / 1e9 - self.offset
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line[15:])
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            line = head.split(b"\r\n", 1)[0]
            if line.startswith((b"post /v1/completions ", b"post /v1/chat/completions ")):
                self.server.start(self, body, read_at, wire_at)
            elif line.startswith(b"get /v1/models "):
                self.write(OK_JSON % (len(MODELS), MODELS))
            else:
                self.write(NOT_FOUND)


def listen(port: int, deadline: float = 5.0) -> socket.socket:
    """A listener whose connections carry kernel receive stamps from their first segment, returned once the kernel
    really stamps: Linux turns receive stamping on for the whole system lazily, from a work queue, when the first
    socket asks (and off again when the last closes), and a TCP segment that arrives before that work has run carries
    no stamp.  A loopback pair is probed until one does (a few hundred microseconds here; 5 s at most)."""
    listener = socket.create_server(("127.0.0.1", port), backlog=4096)
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # inherited: a connection's first segment is stamped
    with socket.create_connection(listener.getsockname()) as client:
        probe, _ = listener.accept()
        with probe:
            probe.settimeout(deadline)
            end = time.monotonic() + deadline
            while time.monotonic() < end:
                client.sendall(b"x")
                if probe.recvmsg(16, 64)[1]:
                    return listener
                time.sleep(0.0005)
    print(f"timed server: no kernel receive stamp within {deadline:g} s; wire times are read times", file=sys.stderr)
    return listener


async def serve(args: argparse.Namespace) -> None:
    server = Server(args.ttft, args.gap, args.tokens)
    loop = asyncio.get_running_loop()
    anchor = RunClock().anchor(tries=50)  # CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest paired reading
    offset = (anchor.wall_ns - anchor.monotonic_ns) / 1e9
    listener = listen(args.port)
    listener.setblocking(False)
    connections: list[Connection] = []

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            connections.append(Connection(server, sock, offset))

    loop.add_reader(listener.fileno(), accept)
    print(f"listening on {listener.getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    while not stop.is_set():  # spin: this process has a core to itself, and every write leaves on time
        server.write_due()
        await asyncio.sleep(0)
    loop.remove_reader(listener.fileno())
    listener.close()
    for conn in connections:
        conn.close()
    server.save(args.truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--truth", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft", type=float, default=0.005)
    parser.add_argument("--gap", type=float, default=0.005)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    import uvloop

    uvloop.run(serve(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
