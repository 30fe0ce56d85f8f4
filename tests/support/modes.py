"""JAX's index width as a test parameter (tests/conftest.py), and the forms
a call runs in (`RUNS`, `run_as`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np


@contextlib.contextmanager
def x64_mode(mode: str | None) -> Iterator[str | None]:
  """Runs the body with x64 off ("x32") or on ("x64"), or as it is (None)."""
  if mode is None:
    yield None
    return
  with jax.enable_x64(mode == "x64"):
    yield mode


# The forms of one call a value test runs: eagerly, jitted, and as the primal
# output of a jvp (an operator's derivative rule computes it again).
RUNS = ("eager", "jit", "jvp")


def run_as(run: str, call: Callable[..., Any], *args: Any) -> Any:
  """`call(*args)` in the form `run`, one of `RUNS`."""
  if run == "jit":
    return jax.jit(call)(*args)
  if run == "jvp":
    return jax.jvp(call, args, tuple(np.zeros_like(a) for a in args))[0]
  return call(*args)
