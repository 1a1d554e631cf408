"""A proxy's 200 on the hot routes goes out in one write that skips Sanic's response path
(flagproxy/http/responses.py PreparedResponse.send); anything the one write does not cover goes Sanic's way,
and with the access log on (LOG_LEVEL=debug) every answer does. The two proxies here serve the same document,
one each way: their answers to the same bytes on the wire must be the same bytes, Date aside."""

from __future__ import annotations

import re
import socket

from flagproxy.http import responses
from tests.http.loopback import KEY, SAMPLE

POST = (
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)
BODY = b'{"context": {"userId": "u-1", "sessionId": "s-1", "properties": {"region": "eu"}}}'


def exchange(port: int, requests: list[bytes]) -> bytes:
    """Send the requests on one connection (the last one closes it) and read everything until the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"".join(requests))
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", received)


def test_the_installed_sanic_takes_the_one_write():
    # Otherwise every answer would quietly go Sanic's slower way (the check exists for Sanic releases that
    # rename its connection state).
    assert responses._SANIC_FITS


def test_one_write_answers_as_sanic_does(proxy_serving):
    fast = proxy_serving(SAMPLE)
    sanic_way = proxy_serving(SAMPLE, log_level="debug")
    key = KEY.encode()
    cases = [
        # keep-alive: two POSTs and a GET on one connection
        ([POST % (key, len(BODY), BODY), POST % (key, len(BODY), BODY),
          b"GET /proxy?userId=u2&sessionId=s2 HTTP/1.1\r\nHost: x\r\nAuthorization: " + key
          + b"\r\nConnection: close\r\n\r\n"], 3),
        # HTTP/1.0 without keep-alive: the answer says close
        ([b"GET /proxy?userId=u3&sessionId=s3 HTTP/1.0\r\nAuthorization: " + key + b"\r\n\r\n"], 1),
        # HEAD goes Sanic's way in both
        ([b"HEAD /proxy?userId=u4&sessionId=s4 HTTP/1.1\r\nHost: x\r\nAuthorization: " + key
          + b"\r\nConnection: close\r\n\r\n"], 1),
    ]  # fmt: skip
    for requests, answers in cases:
        # Every context has a userId and a sessionId, so no answer depends on randomness.
        ours, theirs = exchange(fast.port, requests), exchange(sanic_way.port, requests)
        assert ours.count(b"HTTP/1.1 200 OK") == answers, ours[:300]
        assert ours == theirs
