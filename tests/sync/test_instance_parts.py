"""The parts one instance's sync and workers share, on their own: the published document, the usage spool
and a worker's follower (the whole through real processes: tests/http/test_workers.py)."""

from __future__ import annotations

import asyncio
import os

import orjson
import pytest

from flagproxy.disk import disk_writer
from flagproxy.instance.follower import Follower
from flagproxy.instance.leader import Instance, InstanceFolderError
from flagproxy.instance.store import CACHE_NEVER, SnapshotStore, compile_document, compile_image
from flagproxy.sync.publication import Publication
from flagproxy.sync.spool import UsageSpool
from flagproxy.sync.usage import UsageCollector

PAYLOAD = {"version": 2, "features": [{"name": "a", "enabled": True, "strategies": []}]}


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level: str):
        return lambda message, *args: self.lines.append((level, message))


def test_each_publish_is_a_new_stamp_and_the_next_revision(tmp_path):
    leader, reader = Publication(str(tmp_path)), Publication(str(tmp_path))
    assert reader.stamp() is None and reader.read() is None
    assert leader.publish(orjson.dumps(PAYLOAD), "backup") == 1
    first = reader.read()
    assert (first.revision, first.source, orjson.loads(first.document)) == (1, "backup", PAYLOAD)
    assert reader.stamp() == first.stamp
    assert (
        leader.publish(orjson.dumps(PAYLOAD), "upstream") == 2
    )  # the same bytes again are still a new revision
    assert reader.stamp() != first.stamp
    # A restarted leader goes on from the file's revision, so workers never see one number twice.
    assert Publication(str(tmp_path)).publish(orjson.dumps(PAYLOAD), "upstream") == 3
    assert [n for n in os.listdir(tmp_path) if n.startswith(".snapshot-")] == []  # no temporary left


def test_the_spool_moves_each_count_exactly_once(tmp_path):
    worker_a, worker_b, leader = (
        UsageSpool(str(tmp_path)),
        UsageSpool(str(tmp_path)),
        UsageSpool(str(tmp_path)),
    )
    counted = UsageCollector()
    counted.counts.count("x", True)
    counted.counts.count("x", False)
    counted.counts.merge({"y": {"yes": 2, "no": 0, "variants": {"blue": 2}}})
    worker_a.hand_off(counted.take())
    again = UsageCollector()
    again.counts.count("x", True)
    worker_b.hand_off(again.take())
    worker_b.hand_off(UsageCollector().counts)  # nothing counted: no file
    sender = UsageCollector()
    assert leader.collect(sender) == 2
    assert sender.counts.as_toggles() == {
        "x": {"yes": 2, "no": 1, "variants": {}},
        "y": {"yes": 2, "no": 0, "variants": {"blue": 2}},
    }
    assert leader.collect(sender) == 0  # collected files are gone: nothing is counted twice
    assert os.listdir(tmp_path) == []


def test_a_half_written_hand_off_is_not_read(tmp_path):
    (tmp_path / ".usage-abc").write_bytes(b'{"x": {"yes"')  # a worker killed mid-write leaves this
    sender = UsageCollector()
    assert UsageSpool(str(tmp_path)).collect(sender) == 0
    assert not sender.counts


def _follower(instance: Instance, store: SnapshotStore, collector: UsageCollector, **kwargs) -> Follower:
    return Follower(store, instance.publication, instance.spool, collector, Log(), **kwargs)


def test_the_follower_installs_each_revision_once_and_keeps_the_last_good_one(tmp_path):
    instance = Instance(str(tmp_path))
    store = SnapshotStore()
    follower = _follower(instance, store, UsageCollector())
    assert follower.load() is False and not store.ready  # nothing published: 503 until there is
    instance.publication.publish(orjson.dumps(PAYLOAD), "upstream")
    assert follower.load() is True
    assert (store.revision, store.current.names, store.current.source) == (1, ("a",), "upstream")
    assert follower.load() is False  # the same file: nothing to do
    # A document that does not compile is logged and skipped; the last good snapshot keeps serving.
    instance.publication.publish(b'{"version": 2, "features": "nope"}', "upstream")
    assert follower.load() is False
    assert store.current.names == ("a",) and store.revision == 1
    assert follower.logger.lines[-1][0] == "error" and "revision 2" in follower.logger.lines[-1][1]
    changed = {"version": 2, "features": [{"name": "b", "enabled": True, "strategies": []}]}
    instance.publication.publish(orjson.dumps(changed), "upstream")
    assert follower.load() is True and store.current.names == ("b",) and store.revision == 3


def test_a_serving_follower_loads_the_image_step_by_step_into_the_same_snapshot(tmp_path):
    """While it serves, a worker reads the published file in a thread and loads its image a batch at a
    time (`follow`); what it swaps in is what a load before listening makes, byte for byte."""
    from benchmarks.datasets import snapshot_payload

    instance = Instance(str(tmp_path))
    document = orjson.dumps(snapshot_payload(1500))
    instance.publication.publish(document, "upstream", compile_document(document).image)
    before, serving = SnapshotStore(), SnapshotStore()
    assert _follower(instance, before, UsageCollector()).load() is True
    follower = _follower(instance, serving, UsageCollector())
    assert asyncio.run(follower.follow()) is True and asyncio.run(follower.follow()) is False
    assert follower.logger.lines == []  # the image was loaded, not the document compiled
    assert serving.revision == before.revision == 1
    assert serving.current.features_body == before.current.features_body
    assert serving.current.features_etag == before.current.features_etag
    compared = 0
    for context in ({"userId": "1"}, {"userId": "2", "properties": {"tier": "gold"}}, {}):
        answer = before.current.evaluate_all_body(context, True)
        if answer[1] != CACHE_NEVER:  # not when a flag answered at random
            assert serving.current.evaluate_all_body(context, True) == answer
            compared += 1
    assert compared >= 2


@pytest.mark.parametrize("metrics_on", [True, False])
def test_the_follower_hands_usage_over_only_when_metrics_are_sent(tmp_path, metrics_on):
    instance = Instance(str(tmp_path))
    collector = UsageCollector()
    follower = _follower(instance, SnapshotStore(), collector, hand_off_usage=metrics_on)
    collector.counts.count("a", True)
    follower.stop()  # a stopping worker hands over what it counted (queued: its stop drains the writer)
    disk_writer().drain_now()
    sender = UsageCollector()
    assert instance.spool.collect(sender) == (1 if metrics_on else 0)
    assert bool(sender.counts) is metrics_on
    assert bool(collector.counts) is not metrics_on  # with metrics off nothing would ever collect a file


def test_the_follower_stops_its_worker_when_the_main_process_is_gone(tmp_path):
    stopped: list[bool] = []
    follower = _follower(
        Instance(str(tmp_path)),
        SnapshotStore(),
        UsageCollector(),
        parent_pid=os.getppid() + 100_000,  # not our parent: as if it had died and we were adopted
        on_orphaned=lambda: stopped.append(True),
    )
    asyncio.run(asyncio.wait_for(follower.run(), 5))
    assert stopped == [True]


def test_an_instance_removes_only_the_folder_it_created(tmp_path):
    created = Instance.create()
    joined = Instance(created.directory)
    joined.remove()
    assert os.path.isdir(created.directory)
    created.remove()
    assert not os.path.exists(created.directory)


def test_workers_load_the_image_the_sync_compiled_and_compile_only_when_they_cannot(tmp_path):
    instance = Instance(str(tmp_path))
    image = compile_image(PAYLOAD)
    instance.publication.publish(orjson.dumps(PAYLOAD), "upstream", image)
    published = instance.publication.read()
    assert bytes(published.image) == image and orjson.loads(published.document) == PAYLOAD
    store = SnapshotStore()
    follower = _follower(instance, store, UsageCollector())
    assert follower.load() is True and store.current.names == ("a",)
    assert follower.logger.lines == []  # loaded, not compiled: nothing to say
    # An image this worker cannot use (here: cut short) is compiled from the document beside it instead.
    changed = {"version": 2, "features": [{"name": "b", "enabled": True, "strategies": []}]}
    instance.publication.publish(orjson.dumps(changed), "upstream", compile_image(changed)[:100])
    assert follower.load() is True and store.current.names == ("b",) and store.revision == 2
    assert follower.logger.lines[-1][0] == "warn" and "revision 2" in follower.logger.lines[-1][1]
    # Both ways serve the same bytes.
    imaged, compiled = SnapshotStore(), SnapshotStore()
    imaged.install_image(compile_image(changed), "upstream")
    compiled.install(changed, "upstream")
    assert imaged.current.features_body == compiled.current.features_body
    assert imaged.current.features_etag == compiled.current.features_etag
    answer = imaged.current.evaluate_all_body({"userId": "1"}, True)
    assert answer == compiled.current.evaluate_all_body({"userId": "1"}, True)


def test_an_instance_folder_someone_else_owns_is_refused(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    Instance.create(str(loose))  # ours, but open to others: closed before anything is written
    assert loose.stat().st_mode & 0o777 == 0o700
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chown(foreign, 4242, 4242)  # the tests run as root (CI too): any other user will do
    with pytest.raises(InstanceFolderError, match="owned by user 4242"):
        Instance.create(str(foreign))


def test_a_worker_asks_the_leader_over_the_folder_socket_even_from_a_long_path(tmp_path):
    from flagproxy.instance.channel import ChannelServer, ChannelUnavailable, ask

    folder = tmp_path / ("deep-" * 20)  # past the 107 bytes a unix socket path may have
    folder.mkdir()
    path = str(folder / "leader.sock")
    assert len(path) > 107

    async def scenario() -> None:
        async def double(question):
            return {"twice": question["n"] * 2}

        server = ChannelServer(path, double, Log())
        await server.start()
        assert (os.stat(path).st_mode & 0o777) == 0o600
        answers = await asyncio.gather(*(ask(path, {"n": n}, 5) for n in range(5)))
        assert [a["twice"] for a in answers] == [0, 2, 4, 6, 8]
        await server.stop()
        with pytest.raises(ChannelUnavailable):
            await ask(path, {"n": 1}, 5)  # no leader: a clear exception, never a hang

    asyncio.run(scenario())


def test_a_serving_follower_is_woken_by_each_publish(tmp_path, monkeypatch):
    """The leader's publish wakes every worker's follower (flagproxy/instance/channel.py); its own looks
    are only a safety net, here an hour apart (the usage hand-off too), so only a wake can install these
    revisions. A long folder path (past the 107 bytes of a unix socket path) and a dead worker's socket
    left behind do not get in the way."""
    import socket

    from flagproxy.instance import follower as following
    from flagproxy.instance.channel import wake_workers

    monkeypatch.setattr(following, "WATCH_SECONDS", 3600)
    monkeypatch.setattr(following, "POLL_SECONDS", 3600)
    monkeypatch.setattr(following, "HANDOFF_SECONDS", 3600)
    folder = tmp_path / ("deep-" * 20)
    folder.mkdir()
    instance = Instance(str(folder))
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    monkeypatch.chdir(folder)  # a short path to bind the dead worker's socket at
    dead.bind("wake-1-1.sock")
    dead.close()  # its file stays, no one reads it: the next wake removes it
    store = SnapshotStore()
    follower = _follower(instance, store, UsageCollector())

    async def scenario() -> None:
        task = asyncio.get_running_loop().create_task(follower.run())
        await asyncio.sleep(0)  # run() has bound its wake socket
        for revision in (1, 2, 3):
            payload = {
                "version": 2,
                "features": [{"name": f"f{revision}", "enabled": True, "strategies": []}],
            }
            instance.publication.publish(orjson.dumps(payload), "upstream")
            while store.revision != revision:  # the wait_for below fails the test if no wake comes
                await asyncio.sleep(0.005)
            assert store.current.names == (f"f{revision}",)
        assert not os.path.exists(folder / "wake-1-1.sock")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert wake_workers(str(folder)) == 0  # a stopped follower removes its socket

    asyncio.run(asyncio.wait_for(scenario(), 30))
