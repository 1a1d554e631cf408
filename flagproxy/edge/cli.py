"""`flagproxy edge [edge|offline|health|ready] [options]`: Edge's command line (docs/edge.md).

`flagproxy edge --upstream-url … --tokens …` (or `flagproxy edge edge …`) runs against an upstream,
`flagproxy edge offline --bootstrap-file …` from a file, `flagproxy edge health|ready [--edge-url U]` asks
a running instance (exit 0 when it answers 200: for container health checks). A bad option prints one
line naming it and exits 2; so does a start-up token the upstream says is not a valid client token.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import ssl
import sys
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from flagproxy.edge.settings import EDGE, OFFLINE, OPTIONS, EdgeSettings
from flagproxy.http.command_line import OneLineParser, check_listen, option_groups, refused
from flagproxy.options import ConfigError

PROG = "flagproxy edge"
LIST_KINDS = ("tokens", "offline_tokens", "pretrusted", "cidrs", "headers")


def build_parser(mode: str) -> argparse.ArgumentParser:
    prog = PROG if mode == EDGE else f"{PROG} {mode}"
    description = (
        "Run a drop-in for Unleash Edge against an upstream (a flagproxy server, Unleash, or another edge)."
        if mode == EDGE
        else "Run a drop-in for Unleash Edge's offline mode: flags from a file, no upstream."
    )
    parser = OneLineParser(prog=prog, usage=f"{prog} [options]", description=description)
    groups = option_groups(parser)
    for option in OPTIONS:
        if mode not in option.modes:
            continue
        names = [option.flag] + ([option.short] if option.short else [])
        help_text = f"{option.help} [env {option.env}; default: {option.default_text()}]"
        kwargs: dict[str, Any] = {"dest": option.key, "default": None, "help": help_text}
        if option.kind == "bool":
            kwargs.update(nargs="?", const="true", metavar="BOOL")
        else:
            kwargs["metavar"] = option.env
        if option.kind in LIST_KINDS:
            kwargs["action"] = "append"  # `-t a -t b` is `-t a,b`, as in Edge
        groups[option.group].add_argument(*names, **kwargs)
    if mode == EDGE:
        parser.epilog = "Subcommands: `flagproxy edge offline --help`, `flagproxy edge health|ready --help`."
    return parser


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("health", "ready"):
        return probe(argv[0], argv[1:])
    mode = EDGE
    if argv and argv[0] in (EDGE, OFFLINE):
        mode, argv = argv[0], argv[1:]
    args = build_parser(mode).parse_args(argv)
    options = {k: ",".join(v) if isinstance(v, list) else v for k, v in vars(args).items() if v is not None}
    try:
        settings = EdgeSettings.load(options, os.environ, mode)
    except ConfigError as error:
        return refused(PROG, error)
    given = settings.sources
    if settings.redirect_http_to_https and not settings.tls_enable:
        # Edge starts and ignores it (crates/oss/unleash-edge/src/main.rs redirects only under tls_enable);
        # so does this drop-in, but it says so once rather than leave plain HTTP served unannounced.
        from flagproxy.http.logger import make_logger

        make_logger(None, settings.log_level, False).warn(
            f"{given.get('redirect_http_to_https', '--redirect-http-to-https')} does nothing without "
            f"--tls-enable (as in Edge): {given.get('port', '--port')} serves plain HTTP"
        )
    # With --tls-enable the plain port is bound only to redirect, as in Edge.
    ports = [("tls_server_port", "--tls-server-port")] if settings.tls_enable else []
    if not settings.tls_enable or settings.redirect_http_to_https:
        ports.append(("port", "--port"))
    try:
        for key, flag in ports:
            check_listen(
                settings.interface,
                getattr(settings, key),
                given.get("interface", "--interface"),
                given.get(key, flag),
            )
    except ConfigError as error:
        return refused(PROG, error)
    # Every worker loads the same options; the instance id is the main process's, so the upstream sees
    # one instance.
    options["instance_id"] = settings.instance_id
    if mode == OFFLINE:
        return _serve_offline(settings, options)
    problem = asyncio.run(_check_start_tokens(settings))
    if problem:
        return refused(PROG, problem)
    return _serve(settings, options)


async def _check_start_tokens(settings: EdgeSettings) -> str | None:
    """Ask the upstream about --tokens once: a token it refuses (or that is not a client token) stops the
    start. An upstream that cannot be reached does not: the instance starts not ready and keeps asking."""
    from flagproxy.edge.sync import upstream_client
    from flagproxy.edge.tokens import CLIENT, masked, token_key
    from flagproxy.edge.validation import TokenValidator, UpstreamUnavailable
    from flagproxy.http.logger import make_logger

    if not settings.tokens:
        return None
    client = upstream_client(settings, "", api=False)
    validator = TokenValidator(client, make_logger(None, "fatal", False))
    try:
        answers = await validator.ask([t.secret for t in settings.tokens])
    except UpstreamUnavailable:
        return None
    finally:
        await client.close()
    for index, token in enumerate(settings.tokens, start=1):
        answer = answers.get(token_key(token.secret))
        if answer is None:
            return f"--tokens: entry {index} ({masked(token.secret)}) is not a valid token upstream"
        if answer.type != CLIENT:
            kind = answer.type
            return f"--tokens: entry {index} ({masked(token.secret)}) is a {kind} token, not a client token"
    return None


def _serve_offline(settings: EdgeSettings, options: dict[str, Any]) -> int:
    from flagproxy.edge.offline import BootstrapError, read_bootstrap

    try:
        read_bootstrap(settings.bootstrap_file or "")
    except BootstrapError as error:
        return refused(PROG, f"--bootstrap-file: {error}")
    return _serve(settings, options)


def _worker_app(mode: str, options: dict[str, Any], directory: str, parent_pid: int | None) -> Any:
    """Each worker builds its own app from the same options and environment and follows the leader in
    the main process (`parent_pid`); without it, the one process of `--workers 1`, which leads itself."""
    from flagproxy.edge.routes import create_app

    return create_app(EdgeSettings.load(options, os.environ, mode), directory, parent_pid)


def _serve(settings: EdgeSettings, options: dict[str, Any]) -> int:
    """Serve the instance; with --tls-enable on its HTTPS port, and --redirect-http-to-https's plain port
    answering beside it from this process (flagproxy/http/tls.py)."""
    from flagproxy.http.logger import make_logger

    logger = make_logger(None, settings.log_level, False)
    port, scheme = (settings.tls_server_port, "https") if settings.tls_enable else (settings.port, "http")
    redirect = None
    if settings.tls_enable and settings.redirect_http_to_https:
        from flagproxy.http.tls import HttpsRedirect

        redirect = HttpsRedirect(settings.interface, settings.port, settings.tls_server_port)
        try:
            redirect.start()
        except OSError as error:
            label = settings.sources.get("port", "--port")
            return refused(PROG, f"{label}: cannot listen on {settings.interface}:{settings.port}: {error}")
    try:
        return _serve_instance(settings, options, logger, port, scheme, redirect is not None)
    finally:
        if redirect is not None:
            redirect.stop()


def _serve_instance(
    settings: EdgeSettings, options: dict[str, Any], logger: Any, port: int, scheme: str, redirecting: bool
) -> int:
    from flagproxy.edge.leader import EdgeLeader
    from flagproxy.instance.leader import named_instance_directory
    from flagproxy.instance.run import serve_instance

    workers = settings.workers
    return serve_instance(
        PROG,
        # One folder per app name and port: usage a killed instance could not send goes with the next one's.
        named_instance_directory(f"edge-{settings.app_name}", settings.port),
        workers,
        partial(_worker_app, settings.mode, options),
        lambda instance: EdgeLeader(settings, instance, logger),
        host=settings.interface,
        port=port,
        ssl=settings.tls,
        access_log=settings.log_level == "debug",
        logger=logger,
        listening=(
            f"flagproxy edge ({settings.mode}) is listening on {scheme}://{settings.interface}:{port}"
            + (f", redirecting http://{settings.interface}:{settings.port} there" if redirecting else "")
            + ("" if settings.mode == OFFLINE else f", upstream {settings.upstream_url}, "
               + ("dynamic" if settings.dynamic else "strict") + " tokens")
            + (f", {workers} workers" if workers > 1 else "")
        ),
    )  # fmt: skip


PROBE_DESCRIPTIONS = {
    "health": "Exit 0 when a running edge answers GET /internal-backstage/health with 200 (it is up), "
    "else 1.",
    "ready": "Exit 0 when a running edge answers GET /internal-backstage/ready with 200 (every start-up "
    "token is validated and has flags), else 1.",
}


def probe(kind: str, argv: list[str]) -> int:
    """`flagproxy edge health|ready`: 0 when the instance answers 200 on /internal-backstage/<kind>."""
    parser = OneLineParser(prog=f"{PROG} {kind}", description=PROBE_DESCRIPTIONS[kind])
    parser.add_argument(
        "--edge-url",
        "-e",
        default=None,
        metavar="EDGE_URL",
        help="where the instance runs [env EDGE_URL; default: http://localhost:3063]",
    )
    parser.add_argument(
        "--ca-certificate-file",
        "-c",
        default=None,
        metavar="CA_CERTIFICATE_FILE",
        help="a PEM file of the CA that signed an https:// instance's certificate (a self-signed one) "
        "[env CA_CERTIFICATE_FILE; default: the system's CAs]",
    )
    args = parser.parse_args(argv)
    url = args.edge_url or os.environ.get("EDGE_URL") or "http://localhost:3063"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        print(f"{PROG} {kind}: --edge-url: {url!r} is not an http(s) URL", file=sys.stderr)
        return 2
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        ca_file = args.ca_certificate_file or os.environ.get("CA_CERTIFICATE_FILE") or None
        try:
            context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as error:
            label = "--ca-certificate-file" if args.ca_certificate_file else "CA_CERTIFICATE_FILE"
            print(
                f"{PROG} {kind}: {label}: cannot read {ca_file} as PEM certificates: {error}", file=sys.stderr
            )
            return 2
        connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=5, context=context)
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    path = parts.path.rstrip("/") + f"/internal-backstage/{kind}"
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        body = answer.read().decode(errors="replace")
    except OSError as exc:
        print(f"{PROG} {kind}: {url} cannot be reached: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    print(body)
    return 0 if answer.status == 200 else 1
