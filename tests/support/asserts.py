"""The exactness assertions of the suite: values, and bits."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_NUMPY_FLOATS = tuple(map(np.dtype, (np.float16, np.float32, np.float64)))


def _as_numpy_type(x: np.ndarray) -> np.ndarray:
  """ml_dtypes' floats (bfloat16, 8 and 4 bits) as float32, which holds each
  of their values exactly, and its ints of 2 and 4 bits as int8: NumPy's
  NaN-aware comparison does not know them."""
  if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype not in _NUMPY_FLOATS:
    return x.astype(np.float32)
  if jnp.issubdtype(x.dtype, jnp.integer) and x.dtype.itemsize * 8 > (
    jnp.iinfo(x.dtype).bits
  ):
    return x.astype(np.int8)
  return x


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
  actual, expected = _as_numpy_type(actual), _as_numpy_type(expected)
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
