"""`--s3-bucket-name`: what the edge knows, kept in an S3 bucket as Edge's S3 persister keeps it
(crates/oss/unleash-edge-persistence, src/s3.rs): the objects `/unleash-features.json`,
`/unleash-tokens.json` and `/unleash-last-event-ids.json` (the leading slash is part of Edge's keys), what
they hold and when they are written as flagproxy/edge/persistence_keys.py says, so an Edge and a flagproxy
edge read each other's bucket.

The client is boto3, AWS's own: it reads the credentials as Edge's `aws_config::load_from_env` does
(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the instance's role...); the endpoint and
region come from flagproxy/edge/persistence.py's S3Target. boto3 blocks, so each read and write runs in a
thread: the event loop never waits on S3, and a write left running when the periodic task is cancelled at
stop is waited for before the stop's own, so an older write never lands over it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from flagproxy.edge.persistence import S3Target
from flagproxy.edge.persistence_keys import KeyedPersistence

FEATURES_KEY = "/unleash-features.json"
TOKENS_KEY = "/unleash-tokens.json"
EVENT_IDS_KEY = "/unleash-last-event-ids.json"
# Short enough that a start with S3 unreachable is not held long (the upstream may be there), as Redis's
# 2-second default; two attempts, as a lost packet should not cost a write.
CLIENT_CONFIG = {"connect_timeout": 2, "read_timeout": 10, "retries": {"mode": "standard", "max_attempts": 2}}


class S3Persistence(KeyedPersistence):
    store = "S3"
    features_key, tokens_key, event_ids_key = FEATURES_KEY, TOKENS_KEY, EVENT_IDS_KEY
    trouble = (BotoCoreError, ClientError, OSError)

    def __init__(self, target: S3Target, logger: Any) -> None:
        super().__init__(target.shown, logger)
        self.target = target
        self.client: Any = None  # made in the first read's thread: importing boto3 takes a while
        self.writing: asyncio.Future[None] | None = None

    def _client(self) -> Any:
        if self.client is None:
            import boto3  # the leader's alone, and only with --s3-bucket-name

            style = "path" if self.target.force_path_style else "virtual"
            self.client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.target.endpoint,
                region_name=self.target.region,
                config=Config(s3={"addressing_style": style}, **CLIENT_CONFIG),
            )
        return self.client

    async def read(self, keys: tuple[str, ...]) -> list[bytes | None]:
        return await asyncio.to_thread(self._get_all, keys)

    def _get_all(self, keys: tuple[str, ...]) -> list[bytes | None]:
        client = self._client()
        found: list[bytes | None] = []
        for key in keys:
            try:
                answer = client.get_object(Bucket=self.target.bucket, Key=key)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchKey":
                    raise
                found.append(None)  # not written yet: a first start
            else:
                found.append(answer["Body"].read())
        return found

    async def put(self, values: dict[str, bytes]) -> None:
        if self.writing is not None and not self.writing.done():
            await asyncio.wait([self.writing])
        self.writing = asyncio.ensure_future(asyncio.to_thread(self._put_all, values))
        # Its trouble is said by the caller; one that was cancelled meanwhile must not leave it unread.
        self.writing.add_done_callback(lambda done: done.cancelled() or done.exception())
        await asyncio.shield(self.writing)

    def _put_all(self, values: dict[str, bytes]) -> None:
        client = self._client()
        for key, value in values.items():
            client.put_object(Bucket=self.target.bucket, Key=key, Body=value, ContentType="application/json")

    async def close(self) -> None:
        if self.client is not None:
            await asyncio.to_thread(self.client.close)
