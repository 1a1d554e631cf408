"""What the commands (`flagproxy proxy`, `edge`, `server`, `demo`) share on the command line: argparse with
one-line errors. (The check that an address can be listened on is http/serving.py's `cannot_listen`.)"""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (not the whole usage), like every other start-up error, and
    exits with status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")
