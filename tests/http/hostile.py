"""Malformed HTTP that no HTTP client would send, and a raw socket to send it: shared by the proxy's fuzz
tests (tests/http/test_fuzz.py) and the reliability campaign (tests/reliability/test_malformed_http.py)."""

from __future__ import annotations

import socket

CHUNKED = (
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


# Each is refused with a 4xx, or the connection is closed without an answer.
MALFORMED_HTTP = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /proxy HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /proxy HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    b"GET /pro\x00xy HTTP/1.1\r\nHost: x\r\n\r\n",
    CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n",  # not a chunk size
    CHUNKED + b"5\r\n{}\r\n0\r\n\r\n",  # a chunk shorter than it says
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}",
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}",
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
    b"GET /proxy HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n",
    b"GET /proxy HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(2000)) + b"\r\n",
]


def send_raw(port: int, data: bytes, timeout: float = 5) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        return received
