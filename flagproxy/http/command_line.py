"""What the commands (`flagproxy proxy`, `edge`, `server`, `demo`) share on the command line: argparse with
one-line errors, and the groups `--help` lists the options of the proxy and edge in. (The check that an
address can be listened on is http/serving.py's `cannot_listen`.)"""

from __future__ import annotations

import argparse
from typing import NoReturn


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
