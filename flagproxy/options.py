"""Option values read from strings (flags, environment variables), checked at start, for every command:
lists, booleans, whole numbers, log levels, URLs, tags, trusted proxies, base paths, CORS origins. A value
that cannot be read raises ConfigError naming the option, the one line a command prints before exiting 2.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from flagproxy.http.logger import LOG_LEVELS
from flagproxy.http.trust import TrustProxy


class ConfigError(ValueError):
    """A missing or invalid option. `str()` is the one line printed at start-up."""


# Express's named ranges for `trust proxy`.
TRUST_NAMES = {
    "loopback": ("127.0.0.1/8", "::1/128"),
    "linklocal": ("169.254.0.0/16", "fe80::/10"),
    "uniquelocal": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
}


def from_string(kind: str, label: str, raw: str) -> Any:
    """A string option value (a flag or an environment variable) of `kind`, checked; ConfigError names
    `label` when it cannot be read."""
    if kind in ("str", "secret"):
        return raw
    if kind == "list":
        return split_list(raw)
    if kind == "int":
        if not re.fullmatch(r"\s*\d+\s*", raw):
            raise ConfigError(f"{label}: {raw!r} is not a whole number")
        return int(raw)
    if kind == "bool":
        return parse_bool(label, raw)
    if kind == "level":
        level = raw.strip().lower()
        if level not in LOG_LEVELS:
            raise ConfigError(f"{label}: {raw!r} is not one of {', '.join(LOG_LEVELS)}")
        return level
    if kind == "tags":
        return tuple(parse_tag(label, t) for t in split_list(raw))
    if kind == "trust":
        return parse_trust(label, raw)
    if kind == "base_path":
        return sanitise_base_path(raw)
    if kind == "origin":
        origins = split_list(raw)
        return raw.strip() if "," not in raw else origins
    if kind == "proxy_url":
        return parse_proxy_url(label, raw)
    if kind == "header":
        return parse_header_name(label, raw)
    if kind == "headers":
        return parse_header_pairs(label, raw)
    raise ConfigError(f"{label}: cannot be set from a string")


def split_list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


TRUE_WORDS = {"true", "1", "t", "yes", "y", "on"}
FALSE_WORDS = {"false", "0", "f", "no", "n", "off"}


def parse_bool(label: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ConfigError(f"{label}: {raw!r} is not a boolean (true or false)")


def has_credentials(url: str) -> bool:
    parts = urlsplit(url.strip())
    return parts.username is not None or parts.password is not None


def is_http_url(url: str) -> bool:
    """http(s)://host[:port][/path]: what every upstream request needs (checked at start, not per poll)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def parse_proxy_url(label: str, raw: str) -> str:
    """An HTTP(S) proxy address; `host:port` without a scheme means http://, as curl reads it."""
    url = raw.strip()
    if "://" not in url:
        url = "http://" + url
    if not is_http_url(url):
        raise ConfigError(f"{label}: {raw!r} is not an http:// or https:// proxy address")
    return url


# RFC 9110's token: what a header name may be made of.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A header value: visible ASCII, spaces and tabs (a line break would start another header).
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


def parse_header_name(label: str, raw: str) -> str:
    name = raw.strip()
    if not HEADER_NAME.fullmatch(name):
        raise ConfigError(f"{label}: {raw!r} is not an HTTP header name")
    return name


def parse_header_pairs(label: str, raw: str) -> tuple[tuple[str, str], ...]:
    """Unleash Edge's `Name: value` headers (curl's -H syntax), comma-separated. An entry is named by its
    position, never its text: a value is often a secret."""
    pairs = []
    for index, part in enumerate(split_list(raw), start=1):
        name, sep, value = part.partition(":")
        if not sep or not HEADER_NAME.fullmatch(name.strip()) or not HEADER_VALUE.fullmatch(value.strip()):
            raise ConfigError(
                f"{label}: entry {index} is not `Name: value` (an HTTP header name, a colon, a value)"
            )
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


def parse_tag(label: str, raw: str) -> tuple[str, str]:
    name, sep, value = raw.strip().partition(":")
    if not sep or not name.strip() or not value.strip():
        raise ConfigError(f"{label}: {raw!r} is not tagName:tagValue")
    return name.strip(), value.strip()


def tag_pair(label: str, item: Any) -> tuple[str, str]:
    if isinstance(item, Mapping) and "name" in item and "value" in item:
        return str(item["name"]), str(item["value"])
    if isinstance(item, Sequence) and len(item) == 2:
        return str(item[0]), str(item[1])
    raise ConfigError(f"{label}: {item!r} is not a (tagName, tagValue) pair")


def parse_trust(label: str, raw: str) -> TrustProxy:
    value = raw.strip()
    if value.lower() in ("true", "false"):
        return TrustProxy(trust_all=value.lower() == "true")
    networks = []
    for part in split_list(value):
        if part.lower() in TRUST_NAMES:
            networks += [ipaddress.ip_network(n, strict=False) for n in TRUST_NAMES[part.lower()]]
            continue
        if part.isdigit():
            # Express reads TRUST_PROXY=1 as the address 0.0.0.1 (trust is silently off); say so instead.
            raise ConfigError(
                f"{label}: {part!r} is a number; hop counts are not supported: list the proxies' addresses "
                "or CIDR ranges, or use true"
            )
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ConfigError(
                f"{label}: {part!r} is not true, false, an IP address, a CIDR range or "
                "loopback/linklocal/uniquelocal"
            ) from None
    if not networks:
        raise ConfigError(f"{label}: {raw!r} names no address")
    return TrustProxy(networks=tuple(networks))


def sanitise_base_path(raw: str) -> str:
    """`base/path/` → `/base/path`; blank → `` (as the Node proxy does)."""
    path = raw.strip()
    if not path:
        return ""
    if not path.startswith("/"):
        path = "/" + path
    if path.endswith("/"):
        path = path[:-1]
    return path
