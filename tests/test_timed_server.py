"""The timed server that benchmarks/open_loop.py measures the client against: its truth is causal.  Each request's
kernel receive stamp (SO_TIMESTAMPNS, moved onto CLOCK_MONOTONIC) lies after the client began writing it and before
the server read it, and each token is written after the read."""

import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import orjson

from tests.timed_server import SO_TIMESTAMPNS, listen

ROOT = Path(__file__).resolve().parent.parent


def _request(prompt: str) -> bytes:
    body = orjson.dumps({"model": "timed", "prompt": prompt, "max_tokens": 3, "stream": True})
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    return head + body


def test_each_request_reached_the_kernel_between_the_write_that_sent_it_and_the_servers_read(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    truth = tmp_path / "truth.npz"
    cmd = [sys.executable, "-m", "tests.timed_server", "--truth", str(truth), "--tokens", "3", "--gap", "0.001"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    began: dict[int, float] = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        with socket.create_connection(("127.0.0.1", int(line.split()[-1])), timeout=10) as sock:
            for i in range(8):
                prompt = f"prompt {i}"
                began[zlib.crc32(prompt.encode())] = time.perf_counter()
                sock.sendall(_request(prompt))
                reply = b""
                while not reply.endswith(b"0\r\n\r\n"):  # the chunked reply's end: one request at a time
                    piece = sock.recv(65536)
                    assert piece, "the server closed the connection"
                    reply += piece
                assert reply.count(b'"text"') == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    got = dict(np.load(truth))
    assert sorted(int(k) for k in got["key"]) == sorted(began)
    sent = np.array([began[int(k)] for k in got["key"]])
    assert np.all(sent < got["wire_at"])
    assert np.all(got["wire_at"] < got["read_at"])  # strictly: a request without a kernel stamp has its read time
    assert np.all(got["read_at"] < got["writes"][:, 0])


def test_a_listener_is_handed_over_once_the_kernel_stamps_a_first_segment():
    """Linux turns receive stamping on lazily (a work queue) when the first socket asks and off when the last closes;
    a segment that beats that work has no stamp, which made the first request of a fresh server unstamped on a busy
    machine.  Each round lets the system's stamping lapse (50 ms, the sockets closed) before listening again."""
    unstamped = 0
    for _ in range(10):
        time.sleep(0.05)
        with listen(0) as listener, socket.create_connection(listener.getsockname()) as client:
            client.sendall(b"x")
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                _, ancillary, _, _ = conn.recvmsg(16, 64)
            unstamped += not any(kind == SO_TIMESTAMPNS for _, kind, _ in ancillary)
    assert unstamped == 0
