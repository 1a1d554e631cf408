"""Parsers for constraint values (compile time) and context values (evaluation time).

They follow Yggdrasil, Unleash's Rust engine (../shared/reference/evaluation.md section 6.2, decision E7):
its number grammar and Rust's f64 parser, chrono's RFC 3339 dates, the semver crate's strict SemVer 2.0.0,
and the regex crate's syntax. Both evaluators share these, so they agree by construction.
"""

from __future__ import annotations

import calendar
import ipaddress
import re
from typing import Any

import regex
import semver

# ---------------------------------------------------------------------------------------------- numbers

# The rule grammar's `num` (constraint values); surrounding spaces and tabs are tolerated there.
_NUM_VALUE = re.compile(r"[ \t]*[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[ \t]*\Z")
# Rust's f64::from_str (context values): no surrounding space, no underscores, no hex; inf/nan allowed.
_RUST_F64 = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE | re.ASCII
)


def is_number_value(value: str) -> bool:
    return _NUM_VALUE.match(value) is not None


def parse_context_number(value: str) -> float | None:
    """A context value as Rust's `f64::from_str` reads it, or None when it is not a number."""
    if _RUST_F64.match(value) is None:
        return None
    return float(value)


# ------------------------------------------------------------------------------------------------ dates

_DATE_VALUE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3})?(?:Z|[+-]\d{2}:\d{2})\Z")
_CHRONO_DATE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z",
    re.ASCII,
)


def is_date_value(value: str) -> bool:
    return _DATE_VALUE.match(value) is not None


def parse_date(value: str) -> int | None:
    """An RFC 3339 date-time (chrono's `DateTime<Utc>::from_str`) as nanoseconds since the epoch."""
    m = _CHRONO_DATE.match(value)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        return None
    if year < 1 or day > calendar.monthrange(year, month)[1]:
        return None
    seconds = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
    if m.group(9):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        if int(m.group(10)) > 23 or int(m.group(11)) > 59:
            return None
        seconds -= offset if m.group(9) == "+" else -offset
    fraction = (m.group(7) or "")[:9].ljust(9, "0")
    return seconds * 1_000_000_000 + int(fraction)


# ----------------------------------------------------------------------------------------------- semver

_SEMVER_SHAPE = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?\Z", re.ASCII)


def is_semver_shaped(value: str) -> bool:
    return _SEMVER_SHAPE.match(value) is not None


def semver_key(value: str) -> tuple[Any, ...] | None:
    """A strict SemVer 2.0.0 version as a tuple that orders like SemVer precedence, or None.

    Release versions sort after their pre-releases; numeric identifiers sort before alphanumeric ones and
    numerically among themselves; a shorter identifier list sorts first; build metadata is ignored.
    """
    if not _SEMVER_SHAPE.match(value):
        return None
    try:
        version = semver.Version.parse(value)
    except ValueError:
        return None
    base = (version.major, version.minor, version.patch)
    if version.prerelease is None:
        return (*base, 1)
    identifiers = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in version.prerelease.split(".")
    )
    return (*base, 0, identifiers)


# ------------------------------------------------------------------------------------------ IP networks

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_networks(entries: list[str]) -> tuple[Network, ...]:
    """Comma-split, trimmed entries as networks (a bare address is /32 or /128); bad entries are dropped."""
    networks = []
    for entry in entries:
        entry = entry.strip()
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    return tuple(networks)


def parse_address(value: str) -> Address | None:
    """A context address as Rust's `IpAddr::from_str` reads it: no port, brackets or zone."""
    if "%" in value:
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def networks_contain(networks: tuple[Network, ...], address: Address) -> bool:
    # IPv4 never matches an IPv6 network, IPv4-mapped IPv6 included (as in Yggdrasil).
    return any(address.version == net.version and address in net for net in networks)


# ------------------------------------------------------------------------------------------------ regex

# Constructs the Rust regex crate rejects and the `regex` module would accept: look-around, back-references,
# atomic groups, possessive quantifiers, conditionals.
_UNSUPPORTED_REGEX = regex.compile(
    r"""\(\?(?:<?[=!]|>|\(|P=)       # look-around, atomic group, conditional, named back-reference
      | \\(?:[1-9]|g|k)               # numbered or named back-reference
      | (?:[*+?}])\+                  # possessive quantifier
    """,
    regex.VERBOSE,
)


# The Rust regex crate that Unleash's engines use matches in linear time; the `regex` module backtracks, so
# a pattern with nested quantifiers (`^(a|a)*$`) can take exponential time on a crafted context value, and
# any SDK caller chooses its context: one request could hold a proxy worker for hours. A search that runs
# past this bound counts as no match.
REGEX_TIMEOUT = 0.01  # seconds


def regex_matches(pattern: regex.Pattern[str], value: str) -> bool:
    """Whether a REGEX constraint's compiled `pattern` finds a match in `value` within REGEX_TIMEOUT."""
    try:
        return pattern.search(value, timeout=REGEX_TIMEOUT) is not None
    except TimeoutError:
        return False


# The crate refuses a pattern whose compiled program passes its size limit (10 MiB by default), which
# counted repetitions reach quickly: `a{1000000}` or `(a{1000}){1000}`. The `regex` module would expand
# them instead, taking seconds, and `a{1000000000}` exhausted a worker's memory while the snapshot compiled.
# A pattern whose repetitions expand to more atoms than this is refused as the crate would refuse it (the
# crate's own limit depends on the atoms; this bound keeps the regex module's compile near 0.1 s).
REGEX_MAX_EXPANSION = 100_000


def compile_regex(pattern: str, case_insensitive: bool) -> regex.Pattern[str] | None:
    """A REGEX constraint's pattern with Rust-regex semantics, or None when the crate would reject it."""
    if _has_unsupported_construct(pattern) or _expanded_size(pattern) > REGEX_MAX_EXPANSION:
        return None
    translated = _translate_anchors(pattern)
    flags = regex.V1 | (regex.IGNORECASE if case_insensitive else 0)
    try:
        return regex.compile(translated, flags)
    except (regex.error, ValueError, OverflowError):
        return None


_COUNTED = regex.compile(r"\{(\d*)(,?)(\d*)\}")


def _expanded_size(pattern: str) -> int:
    """How many atoms `pattern` stands for once its counted repetitions (`{n}`, `{n,}`, `{n,m}`) are
    written out, nested ones multiplied; `*`, `+` and `?` add nothing. An upper bound, cheap to compute."""
    sizes = [0]  # per open group: the atoms so far
    last = 0  # the atoms of the last atom or group, which a quantifier repeats
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            last = 1
        elif ch == "[":
            i = _end_of_class(pattern, i)
            last = 1
        elif ch == "(":
            sizes.append(0)
            i += 1
            continue
        elif ch == ")" and len(sizes) > 1:
            last = sizes.pop()
            sizes[-1] += last
            i += 1
            continue
        elif ch == "{" and (counted := _COUNTED.match(pattern, i)) and (counted[1] or counted[3]):
            # Digits past 12 are a count no pattern needs: capped so int() never parses thousands of them.
            count = int((counted[3] or counted[1])[:12])
            sizes[-1] += last * max(count - 1, 0)
            last *= count
            i = counted.end()
            continue
        elif ch in "*+?|^$":
            i += 1
            continue
        else:
            i += 1
            last = 1
        sizes[-1] += 1
    return sum(sizes)


def _end_of_class(pattern: str, start: int) -> int:
    """The index after the bracket expression opening at `start` (nested sets, as regex.V1 reads them)."""
    depth, i = 0, start
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            depth += 1
        elif ch == "]" and i > start + 1 and pattern[i - 1] != "[":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _has_unsupported_construct(pattern: str) -> bool:
    return _UNSUPPORTED_REGEX.search(_strip_classes_and_escaped_parens(pattern)) is not None


def _strip_classes_and_escaped_parens(pattern: str) -> str:
    """The pattern without bracket expressions, so `[(?=]` is not taken for a look-ahead."""
    out = []
    i, depth = 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            if depth == 0:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
        i += 1
    return "".join(out)


def _translate_anchors(pattern: str) -> str:
    """Rust's `$` (without multi-line mode) matches only at the very end; Python's also before a final
    newline. `\\z` is Rust's end-of-text, which Python spells `\\Z`."""
    multiline = regex.search(r"\(\?[a-zA-Z]*m", pattern) is not None
    out = []
    i, depth = 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pair = pattern[i : i + 2]
            out.append(r"\Z" if pair == r"\z" and depth == 0 else pair)
            i += 2
            continue
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        elif ch == "$" and depth == 0 and not multiline:
            out.append(r"\Z")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
