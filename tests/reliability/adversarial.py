"""The adversarial payloads of test_compiler_fuzz.py, compiled and evaluated on both evaluators:
`python -m tests.reliability.adversarial` prints, per evaluator and case, the seconds it took, the warnings
and whether every flag a warning names is off. A child process, so that a hang or a crash is bounded and
seen, never the test run's own."""

import json
import time

from flagproxy.snapshot import compile_snapshot


class Quiet:
    def warning(self, *args):
        pass


def flag(name, **fields):
    return {"name": name, "enabled": True, "strategies": [{"name": "default"}], **fields}


def regex(name, pattern):
    constraint = {"contextName": "userId", "operator": "REGEX", "value": pattern}
    return flag(name, strategies=[{"name": "default", "constraints": [constraint]}])


def number(name, operator, value):
    constraint = {"contextName": "x", "operator": operator, "value": value}
    return flag(name, strategies=[{"name": "default", "constraints": [constraint]}])


depth = 5000
many_segments = [
    {"id": i, "constraints": [{"contextName": "userId", "operator": "IN", "values": [str(i)]}]}
    for i in range(2, 5002)
]
constraints = [{"contextName": f"p{i}", "operator": "STR_CONTAINS", "values": ["x"]} for i in range(10000)]
cases = {
    "catastrophic and invalid regexes": [
        regex(f"regex-{i}", p)
        for i, p in enumerate(
            ["(a+)+$", "^(a|a)*$", "(x+x+)+y", "(", "[z-a]", "a{999999999}", "(a{1000}){1000}", "\\", "(?<"]
        )
    ],
    "dependency cycles": [
        flag("cycle-a", dependencies=[{"feature": "cycle-b"}]),
        flag("cycle-b", dependencies=[{"feature": "cycle-a"}]),
        flag("cycle-self", dependencies=[{"feature": "cycle-self"}]),
    ],
    "a 5000-deep dependency chain": [
        flag(f"chain-{i}", dependencies=[{"feature": f"chain-{i + 1}"}]) for i in range(depth)
    ]
    + [flag(f"chain-{depth}")],
    "5000 segments on one strategy": [
        flag("segments", strategies=[{"name": "default", "segments": list(range(2, 5002))}])
    ],
    "10000 constraints on one strategy": [
        flag("constraints", strategies=[{"name": "default", "constraints": constraints}])
    ],
    "huge numbers": [
        number("num-text", "NUM_EQ", "1e400"),
        number("num-int", "NUM_GT", 10**400),
        number("semver-long", "SEMVER_EQ", "1." + "9" * 5000 + ".0"),
        number("date-far", "DATE_AFTER", "99999-01-01T00:00:00Z"),
        flag("rollout-huge", strategies=[{"name": "flexibleRollout", "parameters": {"rollout": "9" * 400}}]),
        flag("weights-huge", variants=[{"name": "v", "weight": 10**30}]),
    ],
    "huge strings": [
        flag("n" * 1_000_000),
        flag("values-huge", strategies=[{"name": "userWithId", "parameters": {"userIds": "u," * 500_000}}]),
        flag(
            "payload-huge",
            variants=[{"name": "v", "weight": 1000, "payload": {"type": "string", "value": "p" * 2_000_000}}],
        ),
    ],
}
good = {"name": "good", "enabled": True, "strategies": [{"name": "default"}]}
contexts = [{}, {"userId": "a" * 40 + "!"}, {"userId": "7", "properties": {"x": "5", "p9": "xx"}}]
report = {}
for implementation in ("compiled", "pure"):
    for case, features in cases.items():
        started = time.monotonic()
        payload = {"version": 2, "features": [good, *features], "segments": many_segments}
        snapshot = compile_snapshot(payload, implementation=implementation, logger=Quiet())
        off = []
        for context in contexts:
            body, _ = snapshot.evaluate_all_body(context)
            enabled = {t["name"] for t in json.loads(body)["toggles"]}
            assert "good" in enabled, case
            for feature in features:
                snapshot.is_enabled(feature["name"], context)
                if any(repr(feature["name"]) in warning for warning in snapshot.warnings):
                    off.append(feature["name"] not in enabled)
        report[f"{implementation}: {case}"] = {
            "seconds": round(time.monotonic() - started, 3),
            "warnings": len(snapshot.warnings),
            "warned_off": all(off),
        }
print(json.dumps(report))
