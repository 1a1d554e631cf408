"""Key checks in constant time: every configured key is compared, whatever the answer."""

from __future__ import annotations

import hmac
from collections.abc import Iterable


class KeyRing:
    """A set of accepted keys; `accepts(value)` takes as long for a near miss as for a far one."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._keys = tuple(k.encode("utf-8") for k in keys if k)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def accepts(self, presented: str | None) -> bool:
        if not presented:
            return False
        candidate = presented.encode("utf-8", "surrogateescape")
        found = False
        for key in self._keys:
            # No early exit: the time taken does not say which key, or how much of one, matched.
            found |= hmac.compare_digest(key, candidate)
        return found


def accepts_either(presented: str | None, first: KeyRing, second: KeyRing) -> bool:
    """Whether either ring holds the key. Both are always compared, so the time taken does not say which
    kind of key (a client key or a server-side SDK token) was presented."""
    in_first = first.accepts(presented)
    in_second = second.accepts(presented)
    return in_first or in_second
