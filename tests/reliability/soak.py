"""The soak's moving parts: an upstream payload that changes revision after revision (flags added and
removed, strategies rewritten) with what each revision must answer, and load that checks every answer."""

from __future__ import annotations

import copy
import http.client
import json
import random
import threading
import time
from typing import Any

from flagproxy.snapshot import compile_snapshot
from tests.http.loopback import KEY

FLAGS = 150
USERS = 40
CONSTANT = "soak-constant"  # always on: its usage counts are what the stop must flush
# Requests a second per caller: steady load that leaves the 2 shared cores room (the soak is about time and
# change, not throughput, which benchmarks/load measures).
RATE = 150


class ChangingPayload:
    """Revision r of the flags: a marker flag `revision-r` is on for everyone, so every answer says which
    revision served it, and the answer must then be exactly that revision's."""

    def __init__(self, seed: int = 15) -> None:
        self.random = random.Random(seed)
        self.revision = 0
        self.features = [self._flag(f"soak-{i}") for i in range(FLAGS)]
        self.expected: dict[int, Any] = {}
        self.lock = threading.Lock()

    def _strategy(self) -> dict[str, Any]:
        roll = self.random.random()
        if roll < 0.3:
            return {"name": "default", "parameters": {}}
        if roll < 0.6:
            ids = ",".join(f"u{self.random.randrange(USERS)}" for _ in range(5))
            return {"name": "userWithId", "parameters": {"userIds": ids}}
        rollout = str(self.random.randrange(101))
        constraint = {
            "contextName": "userId",
            "operator": "NOT_IN",
            "values": [f"u{self.random.randrange(USERS)}"],
        }
        return {
            "name": "flexibleRollout",
            "parameters": {"rollout": rollout, "stickiness": "userId", "groupId": "g"},
            "constraints": [constraint],
        }

    def _flag(self, name: str) -> dict[str, Any]:
        flag: dict[str, Any] = {
            "name": name,
            "enabled": self.random.random() < 0.8,
            "strategies": [self._strategy()],
        }
        if self.random.random() < 0.3:
            flag["variants"] = [
                {"name": "a", "weight": 500, "weightType": "variable", "stickiness": "userId"},
                {
                    "name": "b",
                    "weight": 500,
                    "weightType": "variable",
                    "stickiness": "userId",
                    "payload": {"type": "string", "value": "x" * self.random.randrange(200)},
                },
            ]
        return flag

    def next(self) -> dict[str, Any]:
        """The next revision's payload: 5 flags removed, 5 added, 10 strategies rewritten."""
        self.revision += 1
        for _ in range(5):
            self.features.pop(self.random.randrange(len(self.features)))
        self.features += [self._flag(f"soak-{self.revision}-{i}") for i in range(5)]
        for _ in range(10):
            self.random.choice(self.features)["strategies"] = [self._strategy()]
        marker = {"name": f"revision-{self.revision}", "enabled": True, "strategies": [{"name": "default"}]}
        constant = {"name": CONSTANT, "enabled": True, "strategies": [{"name": "default"}]}
        payload = {"version": 2, "features": copy.deepcopy([marker, constant, *self.features])}
        snapshot = compile_snapshot(payload)
        with self.lock:
            self.expected[self.revision] = snapshot
            self.expected.pop(self.revision - 20, None)  # no answer is that far behind
        return payload

    def check(self, user: str, body: bytes) -> int:
        """The revision that served `body`; raises unless the answer is exactly that revision's."""
        toggles = json.loads(body)["toggles"]
        markers = [t["name"] for t in toggles if t["name"].startswith("revision-")]
        assert len(markers) == 1, markers
        revision = int(markers[0].split("-")[1])
        with self.lock:
            snapshot = self.expected[revision]
        assert toggles == snapshot.evaluate_all({"userId": user}), (revision, user)
        return revision


class Load(threading.Thread):
    """One caller on a keep-alive connection: GET /proxy for a rotating user (checked against the revision
    that served it) and POST /proxy naming CONSTANT (counted), until `stop` is set."""

    def __init__(self, port: int, payload: ChangingPayload, stop: threading.Event, number: int) -> None:
        super().__init__(daemon=True)
        self.port, self.payload, self.stop, self.number = port, payload, stop, number
        self.answers = 0
        self.named_ok = 0
        self.revisions: set[int] = set()
        self.problems: list[str] = []
        self.last_cut = ""
        self.cut = 0  # requests the stop closed before any answer: never handled, never counted

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        turn = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            next_at += 1 / RATE
            time.sleep(max(0.0, next_at - time.monotonic()))
            turn += 1
            user = f"u{(turn * 7 + self.number) % USERS}"
            named = turn % 3 == 0
            try:
                if named:
                    body = json.dumps({"toggles": [CONSTANT], "context": {"userId": user}})
                    headers = {"Authorization": KEY, "Content-Type": "application/json"}
                    connection.request("POST", "/proxy", body=body, headers=headers)
                else:
                    connection.request("GET", f"/proxy?userId={user}", headers={"Authorization": KEY})
                response = connection.getresponse()
                data = response.read()
            except (
                ConnectionError,
                http.client.RemoteDisconnected,
                http.client.CannotSendRequest,
                OSError,
            ) as exc:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                self.cut += 1
                self.last_cut = repr(exc)
                continue
            except http.client.IncompleteRead as exc:
                self.problems.append(repr(exc))
                continue
            if response.status != 200 or int(response.getheader("content-length", "-1")) != len(data):
                self.problems.append(f"{response.status} {data[:100]!r}")
                continue
            self.answers += 1
            if named:
                self.named_ok += 1
            else:
                try:
                    self.revisions.add(self.payload.check(user, data))
                except (AssertionError, KeyError) as exc:
                    self.problems.append(f"inconsistent answer for {user}: {exc!r}")
        connection.close()
