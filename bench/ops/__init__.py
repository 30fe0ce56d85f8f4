"""Operator plug-ins, one module per jaxops operator.

Each module defines `cases(smoke)`, the list of `bench.harness.Case` rows
(the spec's IR layer shapes, large shapes, a scaling sweep and `jax.vmap`
over a batch), and `BARS`, the operator's performance bars
(`bench.bars`), which `bench.report` evaluates on a run's results.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = (
  "gather_nd",
  "gather_elements",
  "scatter_nd_update",
  "scatter_elements_update",
  "strided_slice",
  "gather",
  "slice",
)


def load(name: str) -> ModuleType:
  """The plug-in module for operator `name` (one of `NAMES`)."""
  return importlib.import_module(f"bench.ops.{name}")
