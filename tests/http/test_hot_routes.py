"""The toggle routes' shorter way through Sanic (flagproxy/http/hot_routes.py): `flagproxy proxy` takes it,
an embedding program's `app.run` (Sanic's own protocol) does not, so the two answer the same bytes on the
wire the two ways. Each case is one connection; its answers must be the same bytes, Date aside, for the
requests the short way handles (a whole body in the buffer, pipelined requests behind it) and for those it
hands to Sanic (a body still arriving, chunked, Expect, too large, HEAD, `/proxy/`, preflights)."""

from __future__ import annotations

import re
import socket
import time

from tests.http.loopback import KEY, SAMPLE

BODY = b'{"context": {"userId": "u-1", "sessionId": "s-1", "properties": {"region": "eu"}}}'


def post(body: bytes = BODY, path: bytes = b"/proxy", extra: bytes = b"", key: bytes = KEY.encode()) -> bytes:
    return (
        b"POST %b HTTP/1.1\r\nHost: x\r\nAuthorization: %b\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%b\r\n%b" % (path, key, len(body), extra, body)
    )


def get(target: bytes, extra: bytes = b"") -> bytes:
    return b"GET %b HTTP/1.1\r\nHost: x\r\nAuthorization: %b\r\n%b\r\n" % (target, KEY.encode(), extra)


CLOSE = get(b"/proxy?userId=u9&sessionId=s9", b"Connection: close\r\n")
CHUNKED = (
    b"POST /proxy HTTP/1.1\r\nHost: x\r\nAuthorization: %b\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%b\r\n0\r\n\r\n" % (KEY.encode(), len(BODY), BODY)
)

CASES: list[tuple[str, list[bytes]]] = [
    # pipelined: each body whole in the buffer with the next request behind it
    ("pipelined", [post() + post(path=b"/proxy/all") + get(b"/proxy?userId=u2&sessionId=s2") + CLOSE]),
    # the body arrives in a second write: the short way leaves it to Sanic's read
    ("split body", [post()[:-10], BODY[-10:] + CLOSE]),
    ("chunked", [CHUNKED + CLOSE]),
    ("expect", [post(extra=b"Expect: 100-continue\r\n") + CLOSE]),
    ("too large", [post(b'{"context": {"userId": "%b"}}' % (b"x" * 110_000))]),
    (
        "415",
        [post(extra=b"Content-Type: text/plain\r\n").replace(b"application/json", b"text/plain", 1) + CLOSE],
    ),
    ("400", [post(b'{"context": ') + post(b"[1]") + CLOSE]),
    ("401", [post(key=b"wrong") + get(b"/proxy?userId=u3", b"Authorization: wrong\r\n") + CLOSE]),
    ("close", [post(extra=b"Connection: close\r\n")]),
    ("http/1.0", [post().replace(b"HTTP/1.1", b"HTTP/1.0", 1)]),
    ("head", [b"HEAD" + get(b"/proxy?userId=u4&sessionId=s4")[3:] + CLOSE]),
    ("slash", [post(path=b"/proxy/") + get(b"/proxy/?userId=u5&sessionId=s5") + CLOSE]),
    ("any case", [get(b"/PROXY?userId=u7&sessionId=s7") + CLOSE]),
    (
        "preflight",
        [
            b"OPTIONS /proxy HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n"
            b"Access-Control-Request-Method: POST\r\n\r\n" + CLOSE
        ],
    ),
    ("cors", [post(extra=b"Origin: https://a.example\r\n") + CLOSE]),
    ("not modified", [get(b"/proxy?userId=u6&sessionId=s6", b'If-None-Match: W/"0-x", *\r\n') + CLOSE]),
]


def exchange(port: int, writes: list[bytes]) -> bytes:
    """Each write on one connection (a short pause between them, so they arrive apart), then everything read
    until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        for number, data in enumerate(writes):
            if number:
                time.sleep(0.2)
            connection.sendall(data)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", received)


def test_hot_routes_answer_as_sanic_does(proxy_factory, embedded):
    short = proxy_factory()
    sanic_way = embedded()
    for name, writes in CASES:
        ours, theirs = exchange(short.port, writes), exchange(sanic_way.port, writes)
        assert ours.startswith(b"HTTP/1."), (name, ours[:200])
        assert ours == theirs, (name, ours[:600], theirs[:600])
    # Without a userId or sessionId the sample's rollouts draw at random: only the statuses can match.
    empty = [post(b"") + post(b"{}") + CLOSE]
    statuses = [re.findall(rb"HTTP/1.1 \d+", exchange(p.port, empty)) for p in (short, sanic_way)]
    assert statuses[0] == statuses[1] == [b"HTTP/1.1 200"] * 3


def test_a_post_to_an_any_case_path_evaluates_its_body(proxy_serving):
    # Express routes /PROXY as /proxy. Sanic's NotFound comes before the body is read: the fallback that
    # serves it read an empty body, and answered as if there were no context (random rollouts).
    proxy = proxy_serving(SAMPLE)
    answers = [exchange(proxy.port, [post(path=path) + CLOSE]) for path in (b"/proxy", b"/PROXY", b"/Proxy/")]
    assert answers[0].count(b"HTTP/1.1 200 OK") == 2
    assert answers[1] == answers[0] == answers[2]
    big = b'{"context": {"userId": "%b"}}' % (b"x" * 110_000)
    too_large = [exchange(proxy.port, [post(big, path=path)]) for path in (b"/proxy", b"/PROXY")]
    assert too_large[0].startswith(b"HTTP/1.1 413")
    assert too_large[1] == too_large[0]


def test_an_embedding_programs_middleware_runs_on_the_toggle_routes(embedded):
    # A middleware turns the shorter way off (tests/proxy/test_hot_routes_choice.py): seen from outside, the
    # program's own response middleware marks every answer, the toggle routes' included.
    proxy = embedded(middleware=True, enable_all_endpoint=True)
    for writes in ([post() + CLOSE], [post(path=b"/proxy/all") + CLOSE], [get(b"/proxy?userId=u1") + CLOSE]):
        answer = exchange(proxy.port, writes)
        assert answer.startswith(b"HTTP/1.1 200 OK") and b"\r\nX-Embedder: seen\r\n" in answer, answer[:400]
    status, headers, _ = proxy.get("/proxy/health")
    assert status == 200 and headers["x-embedder"] == "seen"
