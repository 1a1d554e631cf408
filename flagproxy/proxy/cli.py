"""`flagproxy proxy`: run the evaluation proxy. Every option is a flag and an env var (see --help).

A missing required option or a bad value prints one line naming it and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any

from flagproxy.http.command_line import OneLineParser, check_listen, option_groups, refused
from flagproxy.proxy.settings import OPTIONS, OPTIONS_BY_KEY, ConfigError, ProxySettings


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _workers(raw: str) -> int:
    if not raw.strip().isdigit() or int(raw) < 1:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of at least 1")
    return int(raw)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="flagproxy proxy",
        usage="flagproxy proxy [options]",
        description="Run the Unleash-compatible evaluation proxy. Flags win over environment variables; "
        "the first variable named in an option's help wins over the Node proxy's UNLEASH_* aliases.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = option_groups(parser)
    groups["workers"].add_argument(
        "--workers", type=_workers, default=1, metavar="N", help="number of worker processes (default: 1)"
    )
    for option in OPTIONS:
        if not option.env:
            continue  # keyword-only (logger, storageProvider): listed in the epilog
        names = ", ".join(option.env)
        aliases = f"; alias {', '.join(option.aliases)}" if option.aliases else ""
        spec = f"option {option.spec}; " if option.spec != "(none)" else ""
        help_text = f"{option.help} [{spec}env {names}{aliases}; default: {option.default_text()}]"
        kwargs: dict[str, Any] = {"dest": option.key, "default": None, "help": help_text}
        if option.kind == "bool":
            kwargs.update(nargs="?", const="true", metavar="BOOL")
        else:
            kwargs["metavar"] = option.env[0]
        groups[option.group].add_argument(_flag(option.key), **kwargs)
    keyword_only = [
        f"  {o.key} ({o.spec}): {o.help} [default: {o.default_text()}]" for o in OPTIONS if not o.env
    ]
    parser.epilog = "\n".join(
        [
            "options without a flag or variable, for create_app() / ProxySettings.load() only:",
            *keyword_only,
            "There camelCase names work too (serviceUrl), and cors, httpOptions, expBootstrap and",
            "expServerSideSdkConfig may be nested objects: create_app(cors={'origin': [...]}, ...).",
        ]
    )
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = {key: value for key, value in vars(args).items() if key in OPTIONS_BY_KEY and value is not None}
    try:
        settings = ProxySettings.load(options, os.environ, written={key: _flag(key) for key in options})
        check_listen(settings.host, settings.port, settings.named("host"), settings.named("port"))
    except ConfigError as error:
        return refused("flagproxy proxy", error)
    return serve(settings, options, args.workers)


def _worker_app(options: dict[str, Any], instance_directory: str, parent_pid: int | None) -> Any:
    """Each worker process builds its own app from the same flags and environment (so it loads custom
    strategies and enrichers itself) and follows the main process's sync; `parent_pid` None: the one
    process of `--workers 1`, which syncs itself."""
    from flagproxy.proxy.app import create_worker_app

    return create_worker_app(ProxySettings.load(options, os.environ), instance_directory, parent_pid)


def serve(settings: ProxySettings, options: dict[str, Any], workers: int) -> int:
    from flagproxy.http.logger import make_logger
    from flagproxy.instance.run import serve_instance
    from flagproxy.proxy.sync import ProxyLeader, instance_directory

    logger = make_logger(settings.logger, settings.log_level, settings.use_json_logger)
    for warning in settings.warnings:
        logger.warn(warning)
    return serve_instance(
        "flagproxy proxy",
        instance_directory(settings),
        workers,
        partial(_worker_app, options),
        lambda instance: ProxyLeader(settings, instance, logger),
        host=settings.host,
        port=settings.port,
        access_log=settings.log_level == "debug",
        logger=logger,
        listening=f"flagproxy proxy is listening on {settings.host}:{settings.port}",
    )
