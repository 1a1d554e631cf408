"""What the commands (`flagproxy proxy`, `edge`, `server`, `demo`) share on the command line: argparse with
one-line errors, the groups `--help` lists the options of the proxy and edge in, and the start-up checks:
a setting that cannot be used or an address that cannot be listened on is one line, `<command>: <why>`, and
exit status 2 (`refused`), never a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from flagproxy.options import ConfigError


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (not the whole usage), like every other start-up error, and
    exits with status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


# Each option table entry names its group (proxy/settings.py, edge/settings.py); --help lists them in this
# order, under these titles (a group with no option in a command is left out).
OPTION_GROUPS = {
    "upstream": "upstream (where the flags come from)",
    "serving": "serving (where and how requests are answered)",
    "tokens": "tokens and client keys",
    "usage": "usage metrics sent upstream",
    "persistence": "persistence (what a restart starts from)",
    "prometheus": "Prometheus series",
    "cors": "CORS",
    "workers": "workers",
    "logging": "logging",
}


def option_groups(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """One argparse group per OPTION_GROUPS entry, in order."""
    return {name: parser.add_argument_group(title) for name, title in OPTION_GROUPS.items()}


def refused(prog: str, problem: object) -> int:
    """Print the one line a command that cannot start prints (`prog: problem`); its exit status, 2."""
    print(f"{prog}: {problem}", file=sys.stderr)
    return 2


def check_listen(host: str, port: int, host_option: str, port_option: str) -> None:
    """ConfigError naming the option when `host:port` cannot be listened on (port in use, unknown host)."""
    from flagproxy.http.serving import cannot_listen  # Sanic's worker machinery: loaded once a command starts

    problem = cannot_listen(host, port, host_option, port_option)
    if problem:
        raise ConfigError(problem)
