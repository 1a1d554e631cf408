"""Client errors with the Node proxy's JSON bodies, raised anywhere in request handling, sent by the app.

{"error": "Request validation failed", "validation": [{instancePath, schemaPath, keyword, params,
                                                        message}]}
{"error": "We were unable to parse the data you provided. Please check it for syntax errors. The
           message we got was: \"<parser message>\""}
"""

from __future__ import annotations

from typing import Any

import orjson


class ClientError(Exception):
    """A 4xx answer: status and the exact JSON body bytes."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("error", ""))
        self.status = status
        self.body = orjson.dumps(body)
        # The first validation entry's JSON pointer and message (None for a parse error), so a service
        # with its own error records (the server's ValidationError) can name the field.
        first = (body.get("validation") or [{}])[0]
        self.instance_path: str | None = first.get("instancePath")
        self.problem: str = first.get("message") or str(body.get("error", ""))


def validation_error(
    instance_path: str, schema_path: str, keyword: str, params: dict[str, Any], message: str
) -> ClientError:
    return ClientError(
        400,
        {
            "error": "Request validation failed",
            "validation": [
                {
                    "instancePath": instance_path,
                    "schemaPath": schema_path,
                    "keyword": keyword,
                    "params": params,
                    "message": message,
                }
            ],
        },
    )


def type_error(instance_path: str, schema_path: str, expected: str) -> ClientError:
    return validation_error(
        instance_path, f"{schema_path}/type", "type", {"type": expected}, f"must be {expected}"
    )


def parse_error(message: str) -> ClientError:
    return ClientError(
        400,
        {
            "error": "We were unable to parse the data you provided. Please check it for syntax errors. "
            f'The message we got was: "{message}"'
        },
    )
