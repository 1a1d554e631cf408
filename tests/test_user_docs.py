"""What a user reads stands on its own: README.md, docs/ and every command's --help never send them to files
that are not in the repository (the specification and design notes the project was built from)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ELSEWHERE = re.compile(r"SPEC\.md|DESIGN\.md|DESIGN D\d*|shared/")
COMMANDS = [
    [],
    ["proxy"],
    ["server"],
    ["server", "create-admin"],
    ["edge"],
    ["edge", "offline"],
    ["edge", "health"],
    ["edge", "ready"],
    ["demo"],
]


def test_readme_and_docs_cite_no_file_users_do_not_have() -> None:
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if ELSEWHERE.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "flagproxy")
def test_help_cites_no_file_users_do_not_have(command: list[str]) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "flagproxy", *command, "--help"], capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 0, finished.stderr
    assert len(finished.stdout.splitlines()) > 2, finished.stdout
    assert ELSEWHERE.findall(finished.stdout) == []
