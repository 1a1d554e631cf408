"""A serving worker scans a new features body for `remoteAddress` a piece at a time between requests
(flagproxy/instance/store.py `reads_remote_address_steps`): the answer must be the whole body's, wherever
the mention falls, across the seam of two pieces too. The response cache keys on the caller's address
only when it is true (flagproxy/proxy/app.py)."""

from __future__ import annotations

from flagproxy.instance.store import REMOTE_ADDRESS, SCAN_PIECE, reads_remote_address_steps


def scanned(body: bytes) -> tuple[bool, int]:
    """What the scan answers and how many steps it took."""
    steps = reads_remote_address_steps(body)
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, taken
        taken += 1


def test_the_scan_finds_a_mention_wherever_it_falls() -> None:
    size = 3 * SCAN_PIECE + 100
    for at in (
        0,
        5,
        SCAN_PIECE - 7,
        SCAN_PIECE - 1,
        SCAN_PIECE,
        2 * SCAN_PIECE - 3,
        size - len(REMOTE_ADDRESS),
    ):
        body = bytearray(b"x" * size)
        body[at : at + len(REMOTE_ADDRESS)] = REMOTE_ADDRESS
        assert scanned(bytes(body))[0], at


def test_a_body_without_a_mention_is_scanned_a_piece_per_step() -> None:
    body = b'{"name":"remote","x":"Address"}' * (4 * SCAN_PIECE // 31)
    found, taken = scanned(body)
    assert not found and taken == -(-len(body) // SCAN_PIECE) >= 4
    assert scanned(b"")[0] is False
