"""Seeded random inputs shared by every operator's tests: values every dtype
(and the runtimes used as oracles) represent exactly, and valid indices.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

# Every integer dtype accepted for indices.
INDEX_DTYPES = (
  np.int8,
  np.int16,
  np.int32,
  np.int64,
  np.uint8,
  np.uint16,
  np.uint32,
  np.uint64,
)
# ml_dtypes' floats of 8 bits and fewer, and ints of fewer than 8, that the
# running JAX has (the lowest tested version has fewer): stored one per
# byte, computed by XLA:CPU in float32 or int8.
NARROW_FLOATS = tuple(
  np.dtype(getattr(jnp, name))
  for name in (
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3b11fnuz",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e8m0fnu",
    "float4_e2m1fn",
  )
  if hasattr(jnp, name)
)
NARROW_INTS = tuple(
  np.dtype(getattr(jnp, name))
  for name in ("int2", "uint2", "int4", "uint4")
  if hasattr(jnp, name)
)
# Every integer dtype JAX has, as indices: the narrow ones too (int2 holds
# -2..1).
EVERY_INDEX_DTYPE = (*INDEX_DTYPES, *NARROW_INTS)
# Every dtype JAX supports for data (the 64-bit ones need x64 to stay 64-bit).
DATA_DTYPES = (
  np.bool_,
  *INDEX_DTYPES,
  *NARROW_INTS,
  np.float16,
  jnp.bfloat16,
  *NARROW_FLOATS,
  np.float32,
  np.float64,
  np.complex64,
  np.complex128,
)


def dtype_id(dtype: Any) -> str:
  return np.dtype(dtype).name


# The data dtypes OpenVINO and onnxruntime take for these operators.
ORACLE_DTYPES = (
  np.float32,
  np.float16,
  np.float64,
  np.int8,
  np.uint8,
  np.int16,
  np.uint16,
  np.int32,
  np.uint32,
  np.int64,
  np.uint64,
  np.bool_,
)


def every_number(dtype) -> np.ndarray:
  """Every bit pattern of a narrow float (`NARROW_FLOATS`) that is a
  number, finite or not, one of each, in bit order."""
  dtype = np.dtype(dtype)
  patterns = np.arange(2 ** jnp.finfo(dtype).bits, dtype=np.uint8).view(dtype)
  return patterns[~np.isnan(patterns)]


def random_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
  """Distinct-ish values of `dtype` that every dtype (and the OpenVINO CPU
  plugin, which computes int64 as int32 and f64 as f32) represents exactly;
  for the narrow floats, their numbers from 1/16 to 16 in magnitude and
  zero: a product of a few stays a float32 normal (XLA:CPU flushes float32
  subnormals, among them float8_e8m0fnu's smallest, 2**-127)."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.integers(0, 2, size=shape).astype(np.bool_)
  if dtype in NARROW_FLOATS:
    numbers = every_number(dtype)
    size = np.abs(numbers.astype(np.float32))
    moderate = (size <= 16) & ((size >= 1 / 16) | (size == 0))
    return rng.choice(numbers[moderate], size=shape)
  if dtype in NARROW_INTS or np.issubdtype(dtype, np.integer):
    info = jnp.iinfo(dtype)
    low, high = max(int(info.min), -100), min(int(info.max), 100)
    return rng.integers(low, high + 1, size=shape).astype(dtype)
  if np.issubdtype(dtype, np.complexfloating):
    return (
      rng.integers(-64, 64, size=shape) + 1j * rng.integers(-64, 64, size=shape)
    ).astype(dtype)
  # Small integers and halves are exact in float16/bfloat16/float32.
  return (rng.integers(-256, 256, size=shape) / 2).astype(dtype)


def random_indices(
  rng: np.random.Generator,
  sizes,
  lead_shape,
  dtype=np.int64,
  negative: bool = True,
  *,
  unique: bool = False,
) -> np.ndarray:
  """Valid indices: `indices[..., j]` in [-s_j, s_j - 1] (or [0, s_j - 1]).

  `sizes` is a tuple (one size per last-axis entry, GatherND and
  ScatterNDUpdate: shape `lead_shape + (len(sizes),)`) or an int (one size
  for every element, GatherElements: shape `lead_shape`). With `unique`, the
  tuples are distinct (drawn without replacement; with `negative`, about 30%
  of their components are then written as negative indices).
  """
  if np.ndim(sizes) == 0:
    sizes_arr = np.full(lead_shape, sizes, dtype=np.int64)
    shape = tuple(lead_shape)
  else:
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    shape = (*lead_shape, len(sizes_arr))
  if unique:
    if np.ndim(sizes) == 0:
      raise ValueError("unique indices need one size per tuple component")
    return _unique_tuples(rng, sizes_arr, tuple(lead_shape), negative).astype(
      dtype
    )
  low = -sizes_arr if negative else np.zeros_like(sizes_arr)
  if 0 in shape:
    return np.zeros(shape, dtype)
  return rng.integers(low, sizes_arr, size=shape).astype(dtype)


def half_out_of_range(
  rng: np.random.Generator, sizes, shape, dtype=np.int64
) -> np.ndarray:
  """Indices in [-2s, 2s - 1] for the dim of size s they index (`sizes` as
  in `random_indices`, broadcast along the last axis of `shape`): about half
  of them out of range, on either side."""
  sizes_arr = np.asarray(sizes, dtype=np.int64)
  return rng.integers(-2 * sizes_arr, 2 * sizes_arr, shape, dtype=dtype)


def _unique_tuples(rng, sizes, lead_shape, negative):
  n, k = int(np.prod(lead_shape)), len(sizes)
  if k == 0:
    return np.zeros((*lead_shape, 0), np.int64)
  flat = rng.choice(int(np.prod(sizes)), size=n, replace=False)
  tuples = np.stack(np.unravel_index(flat, tuple(sizes)), -1)
  if negative:
    tuples = np.where(rng.random(tuples.shape) < 0.3, tuples - sizes, tuples)
  return tuples.reshape(*lead_shape, k)
