"""Answers of thousands of flags go out with their head in one gathered write (flagproxy/http/responses.py,
GATHER_BYTES): on the wire they must be the bytes Sanic's own send writes, whole, in order, with the next
pipelined answer right behind them. Sanic's way is a program embedding the proxy with a response
middleware of its own (tests/http/embedded.py), which sends every answer through Sanic's send; its one
extra header is taken out before the two are compared."""

from __future__ import annotations

import json
import re

from tests.http.test_hot_routes import CLOSE, exchange, get, post

FLAGS = 1500  # about 120 kB of toggles: well past the size from which the write is gathered


def many_flags(count: int) -> dict:
    return {
        "version": 2,
        "features": [
            {
                "name": f"large-answer-flag-{number:05d}",
                "enabled": True,
                "impressionData": number % 3 == 0,
                "strategies": [{"name": "default", "parameters": {}, "constraints": []}],
                "variants": [],
            }
            for number in range(count)
        ],
    }


def answers(raw: bytes) -> list[tuple[bytes, bytes]]:
    """Each (head, body) of a connection's answers, read by their Content-Length."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)\r\ncontent-length: (\d+)", head).group(1))
        found.append((head, rest[:length]))
        assert len(rest) >= length, "an answer shorter than its Content-Length"
        raw = rest[length:]
    return found


def test_an_answer_of_thousands_of_flags_is_the_bytes_sanics_send_writes(upstream, proxy_factory, embedded):
    upstream.payload = many_flags(FLAGS)
    ours = proxy_factory()
    sanic_way = embedded(middleware=True)
    writes = [post() + get(b"/proxy?userId=u2&sessionId=s2") + post(b'{"context": {"userId": "u3"}}') + CLOSE]
    mine = exchange(ours.port, writes)
    theirs = exchange(sanic_way.port, writes).replace(b"\r\nX-Embedder: seen", b"")
    assert mine == theirs
    found = answers(mine)
    assert len(found) == 4 and all(head.startswith(b"HTTP/1.1 200 OK\r\n") for head, _ in found)
    for _, body in found:
        toggles = json.loads(body)["toggles"]
        assert len(toggles) == FLAGS and len(body) > 100_000
        assert [t["name"] for t in toggles] == [f"large-answer-flag-{n:05d}" for n in range(FLAGS)]
