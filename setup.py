"""Build script: compiles flagproxy/_eval.pyx unless FLAGPROXY_NO_EXTENSIONS is set.

The same variable forces the pure-Python evaluator at import time (flagproxy/evaluator.py), so one
switch gives a pure build and a pure run.
"""

import os
import sysconfig

from setuptools import Extension, setup

NO_EXTENSIONS = os.environ.get("FLAGPROXY_NO_EXTENSIONS", "") not in ("", "0")

if NO_EXTENSIONS:
    print("*** flagproxy: FLAGPROXY_NO_EXTENSIONS is set, making a pure-Python build")
    ext_modules = []
else:
    from Cython.Build import cythonize

    # The per-flag walk (_outcome -> _first_match -> _condition_holds) is written as small cdef methods
    # marked inline; GCC's default size limits left them as calls, each saving and restoring registers for
    # every flag. Raising the limits inlines the walk into one loop: about a third fewer instructions per
    # request (benchmarks/README.md). The parameters are GCC's; another compiler gets plain -O3.
    COMPILE_ARGS = ["-O3"]
    if "gcc" in os.environ.get("CC", sysconfig.get_config_var("CC") or ""):
        COMPILE_ARGS += ["--param=max-inline-insns-single=2000", "--param=inline-unit-growth=400"]

    print("*** flagproxy: building the compiled evaluator (flagproxy/_eval.pyx)")
    ext_modules = cythonize(
        [Extension("flagproxy._eval", ["flagproxy/_eval.pyx"], extra_compile_args=COMPILE_ARGS)],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )

setup(ext_modules=ext_modules)
