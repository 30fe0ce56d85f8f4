"""Operator plug-ins. Each module defines `FUNCTION` (the jaxops name it
benchmarks) and `cases(smoke)`, the list of `bench.harness.Case` rows: the
spec's IR layer shapes, large shapes and a scaling sweep. A plug-in whose
jaxops function does not exist (yet) is skipped with a note.
"""

from __future__ import annotations

import importlib

import jaxops

NAMES = ("gather_nd", "gather_elements", "scatter_nd_update", "strided_slice")


def load(name: str):
  """The plug-in module for operator `name`, or None if jaxops lacks it."""
  module = importlib.import_module(f"bench.ops.{name}")
  return module if hasattr(jaxops, module.FUNCTION) else None
