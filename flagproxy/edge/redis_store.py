"""`--redis-url`: what the edge knows, kept in Redis under Edge's keys (crates/oss/unleash-edge-persistence,
src/redis.rs), with redis-py's asyncio client: `unleash-features`, `unleash-tokens` and
`unleash-last-event-ids`, what they hold and when they are written as flagproxy/edge/persistence_keys.py
says. The three keys are read in one MGET and written in one pipeline.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from flagproxy.edge.persistence import RedisTarget
from flagproxy.edge.persistence_keys import KeyedPersistence

FEATURES_KEY = "unleash-features"
TOKENS_KEY = "unleash-tokens"
EVENT_IDS_KEY = "unleash-last-event-ids"


class RedisPersistence(KeyedPersistence):
    store = "Redis"
    features_key, tokens_key, event_ids_key = FEATURES_KEY, TOKENS_KEY, EVENT_IDS_KEY
    trouble = (RedisError, OSError)

    def __init__(self, target: RedisTarget, logger: Any) -> None:
        super().__init__(f"Redis at {target.shown}", logger)
        # Edge's read and write configurations: each its connection and response timeout.
        self.reader = Redis.from_url(
            target.url, socket_timeout=target.read_timeout, socket_connect_timeout=target.read_timeout
        )
        self.writer = Redis.from_url(
            target.url, socket_timeout=target.write_timeout, socket_connect_timeout=target.write_timeout
        )

    async def read(self, keys: tuple[str, ...]) -> list[bytes | None]:
        values: list[Any] = await self.reader.mget(*keys)  # bytes: no decode_responses
        return values

    async def put(self, values: dict[str, bytes]) -> None:
        async with self.writer.pipeline(transaction=False) as pipe:
            for key, value in values.items():
                pipe.set(key, value)
            await pipe.execute()

    async def close(self) -> None:
        for client in (self.reader, self.writer):
            await client.aclose()
