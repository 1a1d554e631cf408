"""Snapshot images (flagproxy/image.py): what the sync compiles once and every worker loads.

Run with the process's own evaluator (compiled, or pure under FLAGPROXY_NO_EXTENSIONS=1), as a worker
would: an image only loads into the evaluator that made it.
"""

from __future__ import annotations

import io
import pathlib
import pickle
import random
from typing import Any

import orjson
import pytest

import flagproxy
from benchmarks.datasets import snapshot_payload
from flagproxy.evaluator import CACHE_NEVER, engine_class
from flagproxy.image import ImageError, dump_image, load_image, load_image_steps
from flagproxy.snapshot import compile_snapshot
from flagproxy.strategies import load_strategies_file
from tests.conformance.spec_cases import CASES

STRATEGIES = """
from flagproxy.strategies import Strategy

class Beta(Strategy):
    name = "beta"

    def is_enabled(self, parameters, context):
        return context.get("userId") in parameters.get("ids", "").split(",")

strategies = [Beta()]
"""


def _contexts(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "userId": str(rng.randint(0, 5000)),
            "sessionId": str(rng.randint(0, 50)),
            "appName": rng.choice(["web", "ios", "android", "kiosk"]),
            "environment": rng.choice(["production", "development", "staging"]),
            "remoteAddress": rng.choice(["10.0.0.7", "192.168.1.20", "2001:db8::1", "not an address"]),
            "properties": {
                "plan": rng.choice(["free", "pro", "enterprise"]),
                "region": rng.choice(["eu", "us", "apac"]),
                "age": str(rng.randint(1, 99)),
                "version": rng.choice(["1.2.3", "2.0.0-beta.1", "10.1.0"]),
            },
        }
        for _ in range(count)
    ]


def _assert_same_answers(built: Any, loaded: Any, contexts: list[dict[str, Any]]) -> None:
    assert loaded.names == built.names
    names = [*built.names[:7], "not-a-flag"]
    for context in contexts:
        for include_disabled in (False, True):
            for _ in range(2):  # the second asks through a plan where the compiled evaluator makes one
                body, valid_in = built.evaluate_all_body(context, include_disabled)
                again, valid_again = loaded.evaluate_all_body(context, include_disabled)
                if valid_in != CACHE_NEVER:
                    assert (again, valid_again) == (body, valid_in)
        body, valid_in, outcomes = built.evaluate_named_body(context, names)
        if valid_in != CACHE_NEVER:
            assert loaded.evaluate_named_body(context, names) == (body, valid_in, outcomes)


def _image(payload: Any, strategies: list[Any] | None = None) -> tuple[Any, bytes]:
    snapshot = compile_snapshot(payload, custom_strategies=strategies or ())
    features = orjson.dumps({"version": 2, "features": snapshot.state["features"]})
    return snapshot, dump_image(snapshot.engine, features, strategies or ())


def test_a_loaded_image_answers_as_the_engine_it_was_made_of() -> None:
    snapshot, image = _image(snapshot_payload(400))
    loaded = load_image(image)
    assert type(loaded.engine) is engine_class()
    assert loaded.features_body == orjson.dumps({"version": 2, "features": snapshot.state["features"]})
    _assert_same_answers(snapshot.engine, loaded.engine, _contexts(300))


def test_an_image_loads_a_batch_at_a_time_into_the_same_engine() -> None:
    """A worker that serves loads an image step by step (load_image_steps), answering requests between two
    steps: a 2000-flag image is many small steps, and the engine they make answers as the one made whole."""
    snapshot, image = _image(snapshot_payload(2000))
    steps = load_image_steps(image)
    count = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            stepped = done.value
            break
        count += 1
    assert count > 5  # lists of about BATCH_BYTES of pickle, not the image in one piece (the body: apart)
    whole = load_image(image)
    assert stepped.features_body == whole.features_body
    _assert_same_answers(snapshot.engine, stepped.engine, _contexts(200))
    _assert_same_answers(whole.engine, stepped.engine, _contexts(200))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_client_specification_states_survive_their_image(case: Any) -> None:
    snapshot, image = _image(case.state)
    _assert_same_answers(snapshot.engine, load_image(image).engine, [case.context, {}])


def test_custom_strategies_travel_by_name_and_resolve_to_the_workers_own(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "strategies.py"
    path.write_text(STRATEGIES)
    sync_side = load_strategies_file(str(path))
    beta = {"name": "beta", "parameters": {"ids": "1,2"}}
    payload = {"features": [{"name": "b", "enabled": True, "strategies": [beta]}]}
    _, image = _image(payload, sync_side)
    assert b"is_enabled" not in image  # no code in the image, only the name
    worker_side = load_strategies_file(str(path))  # the worker loads the same file itself
    engine = load_image(image, worker_side).engine
    assert engine.is_enabled("b", {"userId": "2"})
    assert not engine.is_enabled("b", {"userId": "3"})
    with pytest.raises(ImageError, match="custom strategy 'beta'"):
        load_image(image)  # a worker without that strategy compiles the document instead


def test_an_image_that_names_anything_else_is_refused() -> None:
    class Evil:
        def __reduce__(self) -> Any:
            import os

            return (os.system, ("echo owned",))

    with pytest.raises(ImageError, match=r"naming posix\.system"):
        load_image(pickle.dumps(((1, flagproxy.__version__, engine_class().implementation), Evil(), b"")))


def test_truncated_foreign_and_mismatched_images_are_refused() -> None:
    _, image = _image(snapshot_payload(20))
    with pytest.raises(ImageError, match="unreadable"):
        load_image(image[: len(image) // 2])
    with pytest.raises(ImageError, match="unreadable"):
        load_image(b"not a pickle at all")
    file = io.BytesIO()
    pickle.dump(((1, "0.0.0-other", engine_class().implementation), None, b""), file)
    with pytest.raises(ImageError, match="made by"):
        load_image(file.getvalue())


def test_an_images_digest_says_whether_answers_can_differ() -> None:
    """Images of documents that differ only where no answer reads (descriptions, timestamps, types) carry
    the same digest, and each its own body; any change the compiler reads changes the digest."""
    from flagproxy.image import evaluation_of, features_body_of
    from flagproxy.instance.store import compile_document

    base = snapshot_payload(50)

    def image_of(edit: Any) -> bytes:
        document = orjson.loads(orjson.dumps(base))
        edit(document["features"][7])
        compiled = compile_document(orjson.dumps(document))
        assert compiled.image is not None
        return compiled.image

    same = image_of(lambda feature: None)
    described = image_of(lambda feature: feature.update(description="edited", type="kill-switch"))
    assert evaluation_of(same) is not None and evaluation_of(same) == evaluation_of(described)
    assert b'"edited"' in features_body_of(described) and b'"edited"' not in features_body_of(same)
    assert load_image(described).features_body == features_body_of(described)
    for edit in (
        lambda feature: feature.update(enabled=not feature["enabled"]),
        lambda feature: feature.update(impressionData=True),
        lambda feature: feature.update(strategies=[]),
        lambda feature: feature.update(variants=[{"name": "v", "weight": 1000, "stickiness": "default"}]),
        lambda feature: feature.update(name="renamed"),
    ):
        assert evaluation_of(image_of(edit)) != evaluation_of(same)
