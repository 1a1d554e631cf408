"""The `flagproxy` command: one subcommand per part of the service.

Each subcommand lives in its own module and is imported only when chosen, so `flagproxy proxy` never
loads the server's database code and vice versa.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, one-line help). The module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "proxy": ("flagproxy.proxy.cli", "run the evaluation proxy (the Node Unleash Proxy's options)"),
    "server": ("flagproxy.server.cli", "run the flag server (admin and client API)"),
    "edge": ("flagproxy.edge.cli", "run a drop-in for Unleash Edge (Edge's options; offline, health, ready)"),
    "demo": ("flagproxy.demo", "run a server with sample flags and a proxy in front of it"),
}


def _usage() -> str:
    lines = ["usage: flagproxy <command> [options]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "`flagproxy <command> --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from flagproxy import __version__

        print(__version__)
        return 0
    entry = SUBCOMMANDS.get(args[0])
    if entry is None:
        print(f"flagproxy: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(entry[0])
    except ModuleNotFoundError as exc:
        if exc.name and entry[0].startswith(exc.name):
            print(f"flagproxy: the {args[0]!r} command is not available in this build", file=sys.stderr)
            return 2
        raise
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
