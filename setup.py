"""Build the native records decoder (C99, GCC or Clang); all other metadata is in
pyproject.toml. Optional: without a C compiler the install still succeeds, and
`tidelog.records.columnar` falls back to pure Python (the Spark source then reads through
librdkafka; tests/records and tests/spark fail loudly so CI notices).

The web console's frontend (console/web) is built into package data before build_py, so a
wheel carries it and pip users need no Node; without npm the build warns and goes on."""

import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_console(build_py):
    def run(self) -> None:
        script = os.path.join(HERE, "scripts", "build-console")
        if os.path.isdir(os.path.join(HERE, "console", "web")) and os.path.isfile(script):
            if subprocess.call([script]) != 0:
                print("warning: the console's frontend was not built", file=sys.stderr)
        super().run()


setup(
    cmdclass={"build_py": build_py_with_console},
    ext_modules=[
        Extension(
            "tidelog.records._columnar",
            ["src/tidelog/records/_columnar.c"],
            extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra"],
            optional=True,
        )
    ]
)
