"""MurmurHash3 x86_32 in pure Python, for the pure evaluator (the compiled one hashes in C)."""

from __future__ import annotations

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MASK = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    h = seed & _MASK
    length = len(data)
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    k = 0
    tail = length & 3
    if tail == 3:
        k ^= data[end + 2] << 16
    if tail >= 2:
        k ^= data[end + 1] << 8
    if tail >= 1:
        k ^= data[end]
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def normalized_hash(group: str, identifier: str, modulus: int, seed: int = 0) -> int:
    """1..modulus, as Yggdrasil and the Unleash SDKs compute it. A lone surrogate (possible only from Python
    callers: JSON and query strings cannot carry one) is hashed as its surrogatepass bytes, not an error."""
    return murmur3_32(f"{group}:{identifier}".encode("utf-8", "surrogatepass"), seed) % modulus + 1
