"""`flagproxy proxy`: run the evaluation proxy. Every option is a flag and an env var (see --help).

A missing required option or a bad value prints one line naming it and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import Any

from flagproxy.proxy.settings import OPTIONS, OPTIONS_BY_KEY, ConfigError, ProxySettings


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flagproxy proxy",
        description="Run the Unleash-compatible evaluation proxy. Flags win over environment variables; "
        "SPEC.md's variable names win over the Node proxy's UNLEASH_* aliases.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N", help="number of worker processes (default: 1)"
    )
    for option in OPTIONS:
        if not option.env:
            continue  # keyword-only (logger, storageProvider)
        names = ", ".join(option.env)
        aliases = f"; alias {', '.join(option.aliases)}" if option.aliases else ""
        help_text = f"{option.help} [env {names}{aliases}; default: {option.default_text()}]"
        kwargs: dict[str, Any] = {"dest": option.key, "default": None, "help": help_text}
        if option.kind == "bool":
            kwargs.update(nargs="?", const="true", metavar="BOOL")
        else:
            kwargs["metavar"] = option.env[0]
        parser.add_argument(_flag(option.key), **kwargs)
    parser.epilog = "keyword-only options of create_app(): " + ", ".join(o.key for o in OPTIONS if not o.env)
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = {key: value for key, value in vars(args).items() if key in OPTIONS_BY_KEY and value is not None}
    try:
        settings = ProxySettings.load(options, os.environ)
    except ConfigError as error:
        print(f"flagproxy proxy: {error}", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("flagproxy proxy: --workers: must be at least 1", file=sys.stderr)
        return 2
    return serve(settings, options, args.workers)


def _worker_app(options: dict[str, Any]) -> Any:
    """Each worker process builds its own app from the same flags and environment."""
    from flagproxy.proxy.app import create_app

    return create_app(ProxySettings.load(options, os.environ), log_warnings=False)


def serve(settings: ProxySettings, options: dict[str, Any], workers: int) -> int:
    from sanic import Sanic
    from sanic.worker.loader import AppLoader

    from flagproxy.proxy.logger import make_logger

    logger = make_logger(settings.logger, settings.log_level, settings.use_json_logger)
    for warning in settings.warnings:
        logger.warn(warning)
    loader = AppLoader(factory=partial(_worker_app, options))
    app = loader.load()
    app.prepare(
        host=settings.host,
        port=settings.port,
        workers=workers,
        access_log=settings.log_level == "debug",
        motd=False,
        single_process=workers == 1,
    )
    logger.info(f"flagproxy proxy is listening on {settings.host}:{settings.port}")
    if workers == 1:
        Sanic.serve_single(primary=app)
    else:
        Sanic.serve(primary=app, app_loader=loader)
    return 0
