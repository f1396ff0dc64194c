"""Build the native records decoder (C99, GCC or Clang); all other metadata is in
pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tidelog.records._columnar",
            ["src/tidelog/records/_columnar.c"],
            extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra"],
        )
    ]
)
