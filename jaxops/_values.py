"""Python values against the dtypes that must hold them: `data` converted
with the operator's error for what is not an array, host indices converted
without wrap-around, and one rule for Python numbers (`fill_value`, Python
`updates`): of data's kind or a lower one, and a value data's dtype holds.

The rules are in docs/semantics.md#bad-input; everything here runs at trace
time on concrete Python and NumPy values.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxops._common import (
  _is_tracer,
  as_array_like,
  op_error,
  raise_if_ragged,
  shape_str,
)


def as_data(value: Any, op: str, name: str = "data") -> jax.Array:
  """`value` as a JAX array (`jnp.asarray`), or the operator's TypeError or
  ValueError for what is not an array of numbers or bools: None, a string,
  a ragged nested sequence, an object array, a `jax.ShapeDtypeStruct` (a
  description of an array, which `jax.eval_shape` takes)."""
  if isinstance(value, (jax.Array, jax.core.Tracer)):
    return value
  if isinstance(value, jax.ShapeDtypeStruct):
    raise op_error(
      op,
      f"{name} must be an array, got {value}; trace the call with "
      "jax.eval_shape for shapes alone",
      TypeError,
    )
  if value is None or isinstance(value, (str, bytes)):
    raise op_error(
      op,
      f"{name} must be an array, got {type(value).__name__} {value!r}",
      TypeError,
    )
  try:
    return jnp.asarray(value)
  except (TypeError, ValueError) as error:
    cause = error
  raise_if_ragged(value, op, name, cause)
  raise op_error(
    op,
    f"{name} must be an array of numbers or bools, got dtype "
    f"{np.asarray(value).dtype} ({type(value).__name__})",
    TypeError,
  ) from cause


def index_array(indices: Any) -> jax.Array:
  """Indices as a JAX array, values beyond the dtype JAX gives them clamped.

  With x64 off JAX narrows int64 and uint64 host arrays to 32 bits, which
  wraps 2**32 + 1 around to 1, an in-range index. Clamped to the narrow
  dtype's range instead, such a value stays out of range (every dim then
  fits in int32), so each `mode` treats it as one: clip clamps it to the
  last index as x64 mode does (docs/semantics.md#out-of-range).
  """
  array = as_array_like(indices)
  if isinstance(array, np.ndarray) and array.dtype.kind in "iu":
    narrow = jax.dtypes.canonicalize_dtype(array.dtype)
    if narrow != array.dtype:
      info, wide = np.iinfo(narrow), np.iinfo(array.dtype)
      array = np.clip(array, max(info.min, wide.min), info.max).astype(narrow)
  return jnp.asarray(array)


def static_fill_value(fill_value: Any, op: str, dtype: Any) -> Any:
  """Canonicalizes the `fill_value` of a gather of `dtype` data to a hashable
  Python scalar.

  XLA's gather takes the fill value as a static parameter, so it must be
  concrete: None (the dtype's default), or a Python or NumPy scalar number or
  a one-element concrete array, of data's kind or a lower one (int < float <
  complex; bool only for bool data; as `updates` in ScatterNDUpdate), whose
  value data's dtype holds (TypeError or ValueError otherwise,
  docs/semantics.md#out-of-range).
  """
  if fill_value is None:
    return None
  if _is_tracer(fill_value):
    raise op_error(
      op,
      f"fill_value must be a static scalar, got a traced value {fill_value}",
      TypeError,
    )
  if isinstance(fill_value, (bool, int, float, complex)):
    value, kind = fill_value, _python_kind(fill_value)
  else:
    try:
      array = (
        None if isinstance(fill_value, (str, bytes)) else np.asarray(fill_value)
      )
    except ValueError:
      array = None
    array_kind = None if array is None else _kind(array.dtype)
    if array is None or array_kind is None:
      raise op_error(
        op,
        f"fill_value must be a scalar number, got "
        f"{type(fill_value).__name__} {fill_value!r}",
        TypeError,
      )
    if array.size != 1:
      raise op_error(
        op,
        f"fill_value must be a scalar, got an array of shape "
        f"{shape_str(array.shape)}",
        TypeError,
      )
    value, kind = array.reshape(()).item(), array_kind
  check_fits(value, kind, dtype, op, f"fill_value={value!r}")
  return value


_KINDS = {"b": "a bool", "i": "an int", "f": "a float", "c": "a complex"}


def _kind(dtype: Any) -> str | None:
  """ "b", "i" (signed or unsigned), "f" or "c" for a JAX dtype (bfloat16,
  int4 and the float8 types included), None for what is not a number."""
  for kind, category in (
    ("b", jnp.bool_),
    ("i", jnp.integer),
    ("f", jnp.floating),
    ("c", jnp.complexfloating),
  ):
    try:
      if jnp.issubdtype(dtype, category):
        return kind
    except TypeError:
      return None
  return None


def _python_kind(value: Any) -> str:
  """The NumPy kind of a Python bool, int, float or complex."""
  if isinstance(value, bool):
    return "b"
  if isinstance(value, int):
    return "i"
  return "f" if isinstance(value, float) else "c"


def host_values(values: np.ndarray, dtype: Any, op: str, name: str) -> Any:
  """Host values given for an array of `dtype` -- Python numbers as NumPy
  made them, or a NumPy array that JAX narrows to `dtype` in x32 mode --
  checked to fit `dtype` where their kind converts (`check_fits`): nothing
  wraps or overflows on the way.

  Ints beyond 64 bits (an object array) become float64 for inexact `dtype`.
  Returns `values`, or that float64 array.
  """
  if not isinstance(values, np.ndarray):
    return values  # A list holding tracers: its values are not known.
  target = np.dtype(dtype)
  if values.dtype.kind == "O":
    flat = values.reshape(-1).tolist()
    if not flat or not all(type(v) is int for v in flat):
      return values
    for v in flat:
      check_fits(v, "i", target, op, f"{name} value {v}")
    return values.astype(np.float64)
  kind, to_kind = _kind(values.dtype), _kind(target)
  if kind not in _KIND_ORDER or to_kind not in _KIND_ORDER:
    return values
  if _KIND_ORDER[kind] > _KIND_ORDER[to_kind] or not values.size:
    return values
  if to_kind == "i":
    info = jnp.iinfo(target)
    bad = (values < info.min) | (values > info.max)
  else:
    with np.errstate(over="ignore", invalid="ignore"):
      cast = values.astype(target)
    bad = ~_same_numbers(values, cast, target)
  if bad.any():
    v = values.reshape(-1)[int(np.argmax(bad.reshape(-1)))].item()
    raise op_error(
      op, f"{name} value {v} does not fit data dtype {target.name}"
    )
  return values


def check_fits(value: Any, kind: str, dtype: Any, op: str, what: str) -> None:
  """Raises unless `dtype` holds the scalar `value` of NumPy kind `kind`.

  The kind must be `dtype`'s or a lower one (int < float < complex; bool
  only for bool, a TypeError), and the value representable: ints in range,
  finite numbers finite (a ValueError).
  """
  target = np.dtype(dtype)
  name = target.name
  to_kind = _kind(target)
  if to_kind is None:
    return
  if (kind == "b") != (to_kind == "b") or (
    kind != "b" and _KIND_ORDER[kind] > _KIND_ORDER[to_kind]
  ):
    raise op_error(
      op,
      f"{what} ({_KINDS[kind]}) cannot fill {name} data without changing kind",
      TypeError,
    )
  if to_kind == "i":
    info = jnp.iinfo(target)
    fits = info.min <= value <= info.max
  elif to_kind != "b":
    parts = (value.real, value.imag) if kind == "c" else (value,)
    part_dtype = np.finfo(target).dtype if to_kind == "c" else target
    fits = True
    for part in parts:
      try:
        part = float(part)
      except OverflowError:  # An int beyond float64.
        fits = False
        break
      with np.errstate(over="ignore", invalid="ignore"):
        cast = np.asarray(part).astype(part_dtype)
      fits = fits and bool(_same_numbers(part, cast, part_dtype))
  else:
    fits = True
  if not fits:
    raise op_error(op, f"{what} does not fit data dtype {name}")


def _same_numbers(values: Any, cast: np.ndarray, dtype: Any) -> np.ndarray:
  """Where `cast`, `values` converted to the float or complex `dtype`, is
  the same kind of number: a finite one finite and, where the dtype clamps
  instead of overflowing (`float4_e2m1fn`, which has no infinity), within
  its largest; a NaN a NaN; an infinity the same infinity (the 8-bit floats
  without one make it NaN)."""
  values = np.asarray(values)
  wide = (
    np.complex128 if jnp.issubdtype(dtype, jnp.complexfloating) else np.float64
  )
  cast = np.asarray(cast).astype(wide)
  finite = np.isfinite(values)
  same = np.where(
    finite,
    np.isfinite(cast),
    (np.isnan(values) & np.isnan(cast)) | (np.isinf(values) & (values == cast)),
  )
  with np.errstate(over="ignore"):
    clamps = bool(np.isfinite(np.asarray(np.inf).astype(dtype)))
  if clamps:
    same &= ~(finite & (np.abs(values) > float(jnp.finfo(dtype).max)))
  return same


# Kinds of Python values in the order they convert: an int list may fill float
# data, a float list may not fill int data (NumPy's "same_kind").
_KIND_ORDER = {"u": 0, "i": 0, "f": 1, "c": 2}
_KIND_NAMES = {"u": "int", "i": "int", "f": "float", "c": "complex"}


def as_updates(updates: Any, dtype: Any, op: str) -> jax.Array:
  """`updates` as an array of data's `dtype`, or a TypeError.

  Arrays must have data's dtype after JAX's canonicalization (a NumPy float64
  array is float32 when x64 is off, as it would be under jit), and a NumPy
  array that canonicalization narrows must hold values the narrow dtype
  holds (a ValueError, as for Python numbers). Python scalars
  and lists, and the weakly typed arrays JAX makes of them under jit, take
  data's dtype when that keeps or widens their kind. Python bools are not weak
  in JAX and need bool data, as bool arrays do.
  """
  is_array = isinstance(updates, (jax.Array, np.ndarray, jax.core.Tracer))
  weak = (
    jax.typeof(updates).weak_type
    if isinstance(updates, (jax.Array, jax.core.Tracer))
    else not is_array
  )
  updates = as_array_like(updates, op, "updates")
  if not is_array:
    updates = host_values(updates, dtype, op, "updates")
  given = jax.dtypes.canonicalize_dtype(updates.dtype)
  # Kinds as JAX sees them: NumPy's kind of bfloat16, most 8-bit floats and
  # int2/4 is "V".
  given_kind, kind = _kind(given), _kind(dtype)
  if weak and given_kind in _KIND_ORDER and kind in _KIND_ORDER:
    if _KIND_ORDER[given_kind] > _KIND_ORDER[kind]:
      raise op_error(
        op,
        f"updates given as a Python {_KIND_NAMES[given_kind]} cannot be "
        f"converted to data dtype {np.dtype(dtype).name} without changing "
        "kind",
        TypeError,
      )
  elif given != dtype:
    raise op_error(
      op,
      f"updates dtype {given.name} must equal data dtype "
      f"{np.dtype(dtype).name}; jaxops does not cast implicitly, cast one "
      "of them explicitly",
      TypeError,
    )
  elif isinstance(updates, np.ndarray) and given != updates.dtype:
    # x32 mode narrows a 64-bit host array, which would wrap a value the
    # narrow dtype does not hold (docs/semantics.md#bad-input).
    host_values(updates, given, op, "updates")
  return jnp.asarray(updates, dtype=dtype)
