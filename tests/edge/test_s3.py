"""`flagproxy edge --s3-bucket-name`: Edge's objects in a real S3-compatible server (moto's, from PyPI's
`moto[server]`, started here on a free loopback port: it keeps the objects it is sent and answers S3's
REST API), real edge processes and the counting stub upstream (tests/edge/harness.py): a restart while the
upstream is away is ready from the bucket and serves the tokens and flags it knew, with one worker or two;
SIGTERM and SIGINT write before exit 0; the 60-second write puts back what the bucket lost; S3 going away
while the edge runs costs one log line and its return one more; what Unleash Edge writes is read; a bucket
that does not exist costs one line; bad options stop the start with one line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import orjson
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.edge.harness import (
    CountingUpstream,
    EdgeProcess,
    client_flag_names,
    edge,
    edge_written,
    features_doc,
    flag_names,
    serves_edge_written,
    wait_for,
)
from tests.http.loopback import LoopThread, free_port

CLIENT = "*:development.s3-client-secret"
FRONTEND = "*:development.s3-frontend-secret"
FLAGS = features_doc(("alpha", "default", True), ("beta", "other", True))
BUCKET = "edge-persistence"
# Edge's object names (crates/oss/unleash-edge-persistence/src/s3.rs), leading slash included.
FEATURES, TOKENS, EVENT_IDS = "/unleash-features.json", "/unleash-tokens.json", "/unleash-last-event-ids.json"


class S3Server:
    """moto's S3 server of this test's own, on loopback; its objects live in its memory."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client().list_buckets()
                return
            except BotoCoreError:
                assert self.process.poll() is None, "moto's server stopped"
                assert time.monotonic() < deadline, "moto's server did not answer"
                time.sleep(0.1)

    def client(self) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def get_json(self, key: str) -> Any:
        try:
            answer = self.client().get_object(Bucket=BUCKET, Key=key)
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "NoSuchBucket"):
                return None
            raise
        return orjson.loads(answer["Body"].read())

    def env(self) -> dict[str, str]:
        """The AWS variables an edge (or Edge) reads: this server, its region, moto's test credentials."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }


@pytest.fixture
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.kill()


def s3_edge(upstream: str, server: S3Server, *extra: str) -> Any:
    options = ("--s3-bucket-name", BUCKET, "--s3-force-path-style", *extra)
    return edge(upstream, [CLIENT], *options, env=server.env())


class LostObjects:
    """The periodic write's edge, on an S3 server and upstream of its own: started with the module's first
    test (`lost_objects`), its objects deleted once written; the last test waits for the 60-second write to
    put them back while the module's other tests have run meanwhile (their wait and this one overlap)."""

    def __init__(self, loop_thread: LoopThread) -> None:
        self.counting = CountingUpstream(loop_thread)
        self.s3_server = S3Server()
        self.process: EdgeProcess | None = None
        self.error: BaseException | None = None  # the last test's to raise, not every test's setup's

    def begin(self) -> None:
        self.s3_server.start()
        self.s3_server.client().create_bucket(Bucket=BUCKET)
        self.counting.add(CLIENT, "client", "development", ["*"], FLAGS)
        self.process = s3_edge(self.counting.url, self.s3_server)
        self.process.wait_ready()
        written = (FEATURES, TOKENS, EVENT_IDS)
        wait_for(
            lambda: all(self.s3_server.get_json(k) is not None for k in written), "the writes after start"
        )
        time.sleep(3)  # a write of the start's last change may still be under way; then nothing changes
        for key in written:
            self.s3_server.client().delete_object(Bucket=BUCKET, Key=key)

    def end(self) -> None:
        if self.process is not None:
            self.process.stop(signal.SIGTERM)
        self.s3_server.kill()
        self.counting.stop()


@pytest.fixture(scope="module", autouse=True)
def lost_objects(loop_thread: LoopThread) -> Iterator[LostObjects]:
    run = LostObjects(loop_thread)
    try:
        run.begin()
    except Exception as error:  # said by the test that needs it
        run.error = error
    yield run
    run.end()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_restart_while_the_upstream_is_away_is_ready_from_s3(
    counting: CountingUpstream, s3_server: S3Server, workers: int
) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = s3_edge(counting.url, s3_server, "--workers", str(workers))
    process.wait_ready()
    assert flag_names(process, FRONTEND) == {"alpha", "beta"}  # the frontend token is validated: kept
    _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err

    listed = s3_server.client().list_objects_v2(Bucket=BUCKET)["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted([FEATURES, TOKENS, EVENT_IDS])
    features = s3_server.get_json(FEATURES)
    assert isinstance(features, list) and [pair[0] for pair in features] == ["development"]
    assert {f["name"] for f in features[0][1]["features"]} == {"alpha", "beta"}
    tokens = s3_server.get_json(TOKENS)
    assert {(t["type"], t["environment"], t["status"]) for t in tokens} == {
        ("backend", "development", "Validated"),
        ("frontend", "development", "Validated"),
    }
    assert b"secret" not in orjson.dumps(tokens)  # digests, never a secret
    event_ids = s3_server.get_json(EVENT_IDS)
    assert isinstance(event_ids, dict) and isinstance(event_ids["development"], int)

    url = counting.url
    counting.stop()
    process = s3_edge(url, s3_server, "--workers", str(workers))
    try:
        process.wait_ready()  # from S3: the upstream is gone
        assert flag_names(process, FRONTEND) == {"alpha", "beta"}
        assert client_flag_names(process, CLIENT) == {"alpha", "beta"}
        assert process.get("/api/frontend", "*:development.never-seen")[0] == 401  # nobody to ask
    finally:
        _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_writes_to_s3_before_exit(
    counting: CountingUpstream, s3_server: S3Server, workers: int, stop: signal.Signals
) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    process = s3_edge(counting.url, s3_server, "--workers", str(workers))
    process.wait_ready()
    wait_for(lambda: s3_server.get_json(FEATURES) is not None, "the first write after a change")
    for key in (FEATURES, TOKENS, EVENT_IDS):  # nothing changes after this: only the stop's write is left
        s3_server.client().delete_object(Bucket=BUCKET, Key=key)
    _, err = process.stop(stop)
    assert process.popen.returncode == 0, err
    features = s3_server.get_json(FEATURES)
    assert {f["name"] for f in features[0][1]["features"]} == {"alpha", "beta"}
    assert len(s3_server.get_json(TOKENS)) == 1


def test_s3_going_away_costs_one_log_line(counting: CountingUpstream, s3_server: S3Server) -> None:
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = s3_edge(counting.url, s3_server)
    try:
        process.wait_ready()
        wait_for(lambda: s3_server.get_json(FEATURES) is not None, "the first write")
        s3_server.kill()
        for name in ("gamma", "delta", "epsilon"):  # each change is a write that fails
            counting.documents[CLIENT] = features_doc(("alpha", "default", True), (name, "default", True))
            wait_for(lambda name=name: name in flag_names(process, FRONTEND), f"{name} served")
        assert process.popen.poll() is None
        s3_server.start()  # the same port, empty
        s3_server.client().create_bucket(Bucket=BUCKET)
        counting.documents[CLIENT] = features_doc(("alpha", "default", True), ("zeta", "default", True))
        wait_for(lambda: "zeta" in flag_names(process, FRONTEND), "zeta served")

        def written() -> bool:
            features = s3_server.get_json(FEATURES)
            return bool(features) and "zeta" in {f["name"] for f in features[0][1]["features"]}

        wait_for(written, "the write after S3 came back")
    finally:
        out, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    away = [line for line in out.splitlines() if "cannot be used" in line]
    assert len(away) == 1, out
    assert away[0].startswith("ERROR:") and f"S3 bucket {BUCKET} at {s3_server.url}" in away[0]
    assert sum("answers again" in line for line in out.splitlines()) == 1, out
    assert "Traceback" not in out + err


def test_edge_objects_are_read(s3_server: S3Server) -> None:
    """What Unleash Edge itself puts in the bucket (its tokens with their secrets, an environment's
    features) serves a flagproxy edge whose upstream is away; a token of one project sees its flags only."""
    features, tokens = edge_written()
    s3_server.client().put_object(Bucket=BUCKET, Key=FEATURES, Body=features)
    s3_server.client().put_object(Bucket=BUCKET, Key=TOKENS, Body=tokens)
    serves_edge_written("--s3-bucket-name", BUCKET, "--s3-force-path-style", env=s3_server.env())


def test_a_missing_bucket_costs_one_line(counting: CountingUpstream, s3_server: S3Server) -> None:
    """A bucket the server does not have (Edge does not make one either): ready from the upstream, each
    failed write after a change unsaid but the first."""
    counting.add(CLIENT, "client", "development", ["*"], FLAGS)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = edge(counting.url, [CLIENT], "--s3-bucket-name", "no-such-bucket", "--s3-force-path-style",
                   env=s3_server.env())  # fmt: skip
    try:
        process.wait_ready()
        for name in ("gamma", "delta"):
            counting.documents[CLIENT] = features_doc(("alpha", "default", True), (name, "default", True))
            wait_for(lambda name=name: name in flag_names(process, FRONTEND), f"{name} served")
    finally:
        out, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
    away = [line for line in out.splitlines() if "cannot be used" in line]
    assert len(away) == 1 and "NoSuchBucket" in away[0], out


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--s3-force-path-style"], {}, "--s3-force-path-style needs --s3-bucket-name"),
        (["--s3-bucket-name", "no/slashes"], {}, "--s3-bucket-name: 'no/slashes' is not a bucket name"),
        (["--s3-bucket-name", "flags"], {"AWS_ENDPOINT_URL": "localhost:9000"}, "AWS_ENDPOINT_URL: "),
        (["--s3-bucket-name", "flags", "--redis-url", "redis://127.0.0.1:1"], {}, "choose one place"),
        (["--s3-bucket-name", "flags", "--backup-folder", "/tmp"], {}, "choose one place"),
        ([], {"S3_BUCKET_NAME": "flags", "REDIS_HOST": "127.0.0.1"}, "S3_BUCKET_NAME: choose one place"),
    ],
)
def test_bad_s3_options_stop_the_start_with_one_line(args: list[str], env: dict[str, str], says: str) -> None:
    process = edge("http://127.0.0.1:1", [CLIENT], *args, env=env)
    _, err = process.popen.communicate(timeout=60)
    assert process.popen.returncode == 2
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_the_periodic_write_puts_back_what_the_bucket_lost(lost_objects: LostObjects) -> None:
    """Edge writes every 60 s whether or not anything changed (create_persist_data_task): objects deleted
    while nothing changes come back without a stop. Last in the module: `lost_objects` deleted them when
    the module's first test began."""
    if lost_objects.error is not None:
        raise lost_objects.error
    process, s3_server = lost_objects.process, lost_objects.s3_server
    assert process is not None
    try:
        wait_for(lambda: s3_server.get_json(FEATURES) is not None, "the 60-second write", timeout=120)
        assert process.popen.poll() is None
        assert {f["name"] for f in s3_server.get_json(FEATURES)[0][1]["features"]} == {"alpha", "beta"}
        assert len(s3_server.get_json(TOKENS)) == 1
    finally:
        _, err = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, err
