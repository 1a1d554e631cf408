"""The snapshot compiler: an Unleash client API payload becomes an immutable, evaluator-ready model.

Everything that does not depend on the caller's context is done here, once per payload: parameters are
parsed, constraint values turned into sets, numbers, dates, semver keys, networks and compiled regexes,
segments resolved into strategies, variant weight tables summed, dependencies linked, and the JSON fragment
bytes of every possible per-flag result built. Both evaluators (flagproxy/_eval.pyx and its pure twin)
walk the model this package produces.
"""

from flagproxy.compiler.build import build_flags
from flagproxy.compiler.delta import apply_delta_events

__all__ = ["apply_delta_events", "build_flags"]
