"""Read material from ../shared/reference: the Node proxy's sample payload and recorded responses."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from tests.conftest import SHARED

TRANSCRIPTS = SHARED / "reference" / "proxy-transcripts.md"


@functools.cache
def _transcripts() -> str:
    return TRANSCRIPTS.read_text()


def sample_payload() -> dict[str, Any]:
    """Appendix A: the features document the Node proxy's stub upstream served."""
    text = _transcripts()
    appendix = text[text.index("## Appendix A") :]
    block = re.search(r"```json\n(.*?)\n```", appendix, re.S)
    assert block is not None
    return json.loads(block.group(1))


def recorded_body(command_fragment: str) -> bytes:
    """The response body recorded right after the first curl command containing `command_fragment`."""
    text = _transcripts()
    start = text.index(command_fragment)
    exchange = text[start : text.index("```", start)]
    body = exchange.rstrip("\n").rsplit("\n", 1)[-1]
    return body.encode()
