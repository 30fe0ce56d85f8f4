"""JAX's index width as a test parameter (tests/conftest.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax


@contextlib.contextmanager
def x64_mode(mode: str | None) -> Iterator[str | None]:
  """Runs the body with x64 off ("x32") or on ("x64"), or as it is (None)."""
  if mode is None:
    yield None
    return
  with jax.enable_x64(mode == "x64"):
    yield mode
