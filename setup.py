"""Build script: compiles flagproxy/_eval.pyx unless FLAGPROXY_NO_EXTENSIONS is set.

The same variable forces the pure-Python evaluator at import time (flagproxy/evaluator.py), so one
switch gives a pure build and a pure run.
"""

import os

from setuptools import Extension, setup

NO_EXTENSIONS = os.environ.get("FLAGPROXY_NO_EXTENSIONS", "") not in ("", "0")

if NO_EXTENSIONS:
    print("*** flagproxy: FLAGPROXY_NO_EXTENSIONS is set, making a pure-Python build")
    ext_modules = []
else:
    from Cython.Build import cythonize

    print("*** flagproxy: building the compiled evaluator (flagproxy/_eval.pyx)")
    ext_modules = cythonize(
        [Extension("flagproxy._eval", ["flagproxy/_eval.pyx"], extra_compile_args=["-O3"])],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )

setup(ext_modules=ext_modules)
