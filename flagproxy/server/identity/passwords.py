"""Passwords: argon2id (argon2-cffi), a strength rule, and verification that takes as long for an unknown
account as for a wrong password.

The hash string carries its own parameters; `needs_rehash` lets a login upgrade an old one.
"""

from __future__ import annotations

import re
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_LENGTH = 10
MAX_LENGTH = 256  # argon2 takes any length; a bound keeps a login from being a CPU sink
_hasher = PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Verified against when no user matched, so an unknown email costs a login as much as a known one.
    Made at the first sign-in, not at import: a hash costs 64 MiB and half a second of CPU, and every
    server process (the main one and each worker) imports this module at start."""
    return _hasher.hash("flagproxy-no-such-user-password")


def weakness(password: str) -> str | None:
    """Why `password` is refused, as the API says it; None when it is strong enough (Unleash's rule:
    at least 10 characters, with an uppercase and a lowercase letter, a digit and a special character)."""
    if len(password) < MIN_LENGTH:
        return f"must be at least {MIN_LENGTH} characters long"
    if len(password) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters long"
    if not re.search(r"[A-Z]", password) or not re.search(r"[a-z]", password):
        return "must contain an uppercase and a lowercase letter"
    if not re.search(r"[0-9]", password):
        return "must contain a digit"
    if not re.search(r"[^A-Za-z0-9]", password):
        return "must contain a special character (not a letter or a digit)"
    return None


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify(password_hash: str | None, password: str) -> bool:
    """Whether `password` matches; with no hash (unknown user, no password set) the same work is done."""
    try:
        return _hasher.verify(password_hash or _dummy_hash(), password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """Whether a stored hash was made with weaker parameters than today's (it is replaced at sign-in)."""
    try:
        return _hasher.check_needs_rehash(password_hash)
    except (InvalidHashError, ValueError):
        return True
