"""The exactness assertions of the suite: values, and bits."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# The floats of ml_dtypes, which NumPy's NaN-aware comparison does not know.
NARROW_FLOATS = tuple(
  np.dtype(d) for d in (jnp.bfloat16, jnp.float8_e4m3fn, jnp.float8_e5m2)
)


def assert_same(actual: Any, expected: Any, context: str = "") -> None:
  """Exact equality of shape, dtype and values, signed zeros included (NaNs
  compare equal whatever their payload).

  `expected` is a NumPy result; its dtype is taken as JAX canonicalizes it in
  the running x64 mode (float64 -> float32 in x32), as jaxops' inputs were.
  """
  actual = np.asarray(actual)
  expected = np.asarray(expected)
  expected = expected.astype(jax.dtypes.canonicalize_dtype(expected.dtype))
  assert actual.shape == expected.shape, (
    f"{context}: shape {actual.shape} != {expected.shape}"
  )
  assert actual.dtype == expected.dtype, (
    f"{context}: dtype {actual.dtype} != {expected.dtype}"
  )
  if actual.dtype in NARROW_FLOATS:
    # NumPy's NaN-aware comparison does not know bfloat16 and the 8-bit
    # floats (ml_dtypes); float32 holds each of their values exactly.
    actual, expected = actual.astype(np.float32), expected.astype(np.float32)
  np.testing.assert_array_equal(actual, expected, err_msg=context)
  if np.issubdtype(actual.dtype, np.floating):
    numbers = ~np.isnan(actual)
    np.testing.assert_array_equal(
      np.signbit(actual[numbers]),
      np.signbit(expected[numbers]),
      err_msg=f"{context}: signed zeros differ",
    )


def assert_same_bits(actual: Any, expected: Any, context: str = "") -> None:
  """`assert_same`, and every element's bits equal: NaN payloads and signs
  too (a float compared as the unsigned int of its width)."""
  assert_same(actual, expected, context)
  actual = np.asarray(actual)
  expected = np.asarray(expected).astype(actual.dtype)
  unsigned = np.dtype(f"uint{8 * actual.dtype.itemsize}")
  np.testing.assert_array_equal(
    actual.view(unsigned), expected.view(unsigned), err_msg=f"{context}: bits"
  )
