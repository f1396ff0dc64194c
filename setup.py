"""Build the native records decoder (C99, GCC or Clang); all other metadata is in
pyproject.toml. Optional: without a C compiler the install still succeeds, and
`tidelog.records.columnar` falls back to pure Python (the Spark source then reads through
librdkafka; tests/records and tests/spark fail loudly so CI notices)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tidelog.records._columnar",
            ["src/tidelog/records/_columnar.c"],
            extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra"],
            optional=True,
        )
    ]
)
