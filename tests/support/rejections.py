"""The bad-input driver: every operator's table of rejected inputs runs here.

Every error jaxops raises for bad input has one form: the operator and its
version, then `attribute=value`, the rule and the shapes
(docs/semantics.md). The tables live beside each operator's tests; this
module checks a row the same way for all four:

* `assert_op_error(op, exc, pattern, call)`: `call()` raises `exc`, whose
  message is `"{op}: "` followed by text that `pattern` matches
  (`re.search`, so `^` anchors right after the operator's name).
* `assert_rejected(...)`: the operator called eagerly, under `jax.jit` and
  under `jax.eval_shape`, and the public shape rule on the bare shapes, all
  raise that error at trace time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def assert_op_error(
  op: str, exc: type[Exception], pattern: str, call: Callable[[], Any]
) -> None:
  """`call()` raises `exc` with the message `"{op}: " + text`, `pattern`
  matching `text`."""
  with pytest.raises(exc) as info:
    call()
  message = str(info.value)
  prefix = f"{op}: "
  assert message.startswith(prefix), message
  text = message[len(prefix) :]
  assert re.search(pattern, text), f"{pattern!r} not in {text!r}"


def assert_rejected(
  op: str,
  exc: type[Exception],
  pattern: str,
  *,
  operator: Callable[..., Any] | None = None,
  shape_rule: Callable[..., Any] | None = None,
  arrays: Sequence[tuple[tuple[int, ...], Any]] = (),
  attrs: dict[str, Any] | None = None,
) -> None:
  """`operator(*arrays, **attrs)` and `shape_rule(*shapes, **attrs)` raise
  the same error at trace time.

  Args:
    op: the operator's name and version, e.g. `"GatherND-8"`.
    exc, pattern: the exception type and a regex its message must match.
    operator: the public function, or None to check the shape rule alone
      (shapes no array can have, e.g. a negative dim).
    shape_rule: the public shape rule, or None where the error is about
      something the rule does not see (dtypes, modes).
    arrays: `(shape, dtype)` of each array argument, in order.
    attrs: the static arguments, by keyword.
  """
  attrs = attrs or {}
  if operator is not None:
    zeros = [np.zeros(shape, dtype) for shape, dtype in arrays]
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in arrays]

    def call(*args):
      return operator(*args, **attrs)

    assert_op_error(op, exc, pattern, lambda: call(*zeros))
    assert_op_error(op, exc, pattern, lambda: jax.jit(call)(*zeros))
    assert_op_error(op, exc, pattern, lambda: jax.eval_shape(call, *structs))
  if shape_rule is not None:
    shapes = [shape for shape, _ in arrays]
    assert_op_error(op, exc, pattern, lambda: shape_rule(*shapes, **attrs))


def assert_rejected_call(
  op: str, exc: type[Exception], pattern: str, call: Callable[[], Any]
) -> None:
  """`call()` raises the operator's error eagerly and under `jax.jit` (its
  arguments then constants of the trace), as `assert_op_error` checks it."""
  assert_op_error(op, exc, pattern, call)
  assert_op_error(op, exc, pattern, jax.jit(call))


# `data` that is not an array, for every operator's table: (value, exception,
# message regex). A `ShapeDtypeStruct` describes an array without holding one
# (`jax.eval_shape` takes it, an operator does not).
BAD_DATA = {
  "none": (None, TypeError, r"^data must be an array, got None"),
  "string": ("abc", TypeError, r"^data must be an array, got str 'abc'"),
  "bytes": (b"1", TypeError, r"^data must be an array, got bytes b'1'"),
  "ragged_list": (
    [[1.0, 2.0], [3.0]],
    ValueError,
    r"^data must be an array, got a ragged nested sequence",
  ),
  "object_array": (
    np.array([1.0, None], dtype=object),
    TypeError,
    r"^data must be an array of numbers or bools, got dtype object",
  ),
  "string_array": (
    np.array(["a", "b"]),
    TypeError,
    r"^data must be an array of numbers or bools, got dtype <U1",
  ),
  "shape_dtype_struct": (
    jax.ShapeDtypeStruct((2, 3), np.float32),
    TypeError,
    r"^data must be an array, got ShapeDtypeStruct\(shape=\(2, 3\), "
    r"dtype=float32\); trace the call with jax.eval_shape for shapes alone",
  ),
}


# Updates that data's dtype does not hold, for the tables of the scatters:
# (data, one update, expectation). An expectation is (exception, message
# regex), or one per x64 mode where the rule depends on it (`in_mode`): x32
# mode narrows a NumPy 64-bit array to 32 bits, and a value the narrow dtype
# does not hold is rejected as a Python int is (it would wrap); x64 mode
# keeps the array's dtype, which must be data's.
def _narrowed(data_dtype: Any, wide_dtype: Any, value: Any) -> tuple:
  """A BAD_UPDATES row: one update `value` of the 64-bit `wide_dtype`, which
  32-bit mode narrows to data's dtype, which does not hold it."""
  data, wide = np.dtype(data_dtype).name, np.dtype(wide_dtype).name
  shown = re.escape(str(value))
  return (
    np.zeros(3, data_dtype),
    np.array([value], wide_dtype),
    {
      "x32": (
        ValueError,
        rf"^updates value {shown} does not fit data dtype {data}",
      ),
      "x64": (
        TypeError,
        rf"^updates dtype {wide} must equal data dtype {data}",
      ),
    },
  )


def _python(data_dtype: Any, value: Any, shown: str | None = None) -> tuple:
  """A BAD_UPDATES row: one Python-number update `value` that data's dtype
  does not hold (`shown`: the message's regex for it, if not its repr)."""
  data = np.dtype(data_dtype).name
  shown = re.escape(str(value)) if shown is None else shown
  return (
    np.zeros(3, data_dtype),
    [value],
    (ValueError, rf"^updates value {shown} does not fit data dtype {data}"),
  )


BAD_UPDATES = {
  "python_int_1000_into_int8": _python(np.int8, 1000),
  "python_int_minus1_into_uint8": _python(np.uint8, -1),
  "python_int_2**40_into_int32": _python(np.int32, 2**40),
  "python_int_2**64_into_int32": _python(np.int32, 2**64),
  "python_int_2**200_into_float32": _python(np.float32, 2**200),
  # float4_e2m1fn clamps to 6 where another float overflows, and has no
  # infinity: both accepted before, the value changed.
  "python_float_100_into_float4_e2m1fn": _python(jnp.float4_e2m1fn, 100.0),
  "python_float_inf_into_float8_e4m3fn": _python(
    jnp.float8_e4m3fn, float("inf")
  ),
  "numpy_int64_2**40_into_int32": _narrowed(np.int32, np.int64, 2**40),
  "numpy_int64_-2**31-1_into_int32": _narrowed(
    np.int32, np.int64, -(2**31) - 1
  ),
  "numpy_uint64_2**32_into_uint32": _narrowed(np.uint32, np.uint64, 2**32),
  "numpy_float64_1e300_into_float32": _narrowed(np.float32, np.float64, 1e300),
}


def in_mode(expectation: Any, jax_mode: str) -> tuple[type[Exception], str]:
  """A table's `(exception, regex)`, or its entry for `jax_mode` where the
  expectation depends on the x64 mode (a dict by mode)."""
  return expectation[jax_mode] if isinstance(expectation, dict) else expectation


def assert_scatter_rejected(
  op: str, row: Any, jax_mode: str, scatter: Callable[..., Any], **kwargs: Any
) -> None:
  """A scatter table's row `(data, indices, updates, expectation)`:
  `scatter(data, indices, updates, **kwargs)` raises the expectation's
  error in `jax_mode`, eagerly and under `jax.jit`."""
  data, indices, updates, expectation = row
  exc, pattern = in_mode(expectation, jax_mode)
  assert_rejected_call(
    op, exc, pattern, lambda: scatter(data, indices, updates, **kwargs)
  )


# A ragged nested list given as `indices` or `updates`: the operator's
# ValueError, as for `data` (BAD_DATA["ragged_list"]).
RAGGED_LIST = [[0], [0, 1]]


def ragged(name: str) -> str:
  """The message regex for a ragged nested sequence given as `name`."""
  return rf"^{name} must be an array, got a ragged nested sequence"


# Index lists holding Python ints that no int64 array holds, for the tables of
# the operators that take `indices`: (index tuple list, message regex). Each
# is out of range for every dim; NumPy would make them float64 or object.
BIG_INDEX_LISTS = {
  "2**64": (
    [[2**64]],
    r"^indices\[0, 0\]=18446744073709551616 is out of range for every dim: "
    r"no index dtype holds it",
  ),
  "-2**63-1": (
    [[-(2**63) - 1]],
    r"^indices\[0, 0\]=-9223372036854775809 is out of range for every dim",
  ),
  "2**63_beside_a_negative": (
    [[-1], [2**63]],
    r"^indices\[1, 0\]=9223372036854775808 is out of range for every dim: "
    r"no index dtype holds it",
  ),
}


# `fill_value`s no gather takes, for the tables of the gathers: (data dtype,
# fill value, exception, message regex). One rule: a scalar number of data's
# kind or a lower one (int < float < complex; bool only for bool data), whose
# value data's dtype holds.
BAD_FILL_VALUES = {
  "300_uint8": (
    np.uint8,
    300,
    ValueError,
    r"^fill_value=300 does not fit data dtype uint8",
  ),
  "minus1_uint8": (
    np.uint8,
    -1,
    ValueError,
    r"^fill_value=-1 does not fit data dtype uint8",
  ),
  "2**40_int32": (
    np.int32,
    2**40,
    ValueError,
    r"^fill_value=1099511627776 does not fit data dtype int32",
  ),
  "2**64_int32": (
    np.int32,
    2**64,
    ValueError,
    r"^fill_value=18446744073709551616 does not fit data dtype int32",
  ),
  "1e300_float32": (
    np.float32,
    1e300,
    ValueError,
    r"^fill_value=1e\+300 does not fit data dtype float32",
  ),
  # Narrow floats: a NaN or an infinity the dtype has no such value for (the
  # 8-bit floats without one made it NaN, float4_e2m1fn clamped it), and a
  # number beyond float4_e2m1fn's largest, 6, which it clamps instead of
  # overflowing (all accepted before, the value silently changed).
  "inf_float8_e4m3fn": (
    jnp.float8_e4m3fn,
    float("inf"),
    ValueError,
    r"^fill_value=inf does not fit data dtype float8_e4m3fn",
  ),
  "nan_float4_e2m1fn": (
    jnp.float4_e2m1fn,
    float("nan"),
    ValueError,
    r"^fill_value=nan does not fit data dtype float4_e2m1fn",
  ),
  "100_float4_e2m1fn": (
    jnp.float4_e2m1fn,
    100,
    ValueError,
    r"^fill_value=100 does not fit data dtype float4_e2m1fn",
  ),
  "nan_int32": (
    np.int32,
    float("nan"),
    TypeError,
    r"^fill_value=nan \(a float\) cannot fill int32 data without "
    r"changing kind",
  ),
  "1.5_uint8": (
    np.uint8,
    1.5,
    TypeError,
    r"^fill_value=1.5 \(a float\) cannot fill uint8 data",
  ),
  "complex_float32": (
    np.float32,
    1 + 2j,
    TypeError,
    r"^fill_value=\(1\+2j\) \(a complex\) cannot fill float32 data",
  ),
  "bool_float32": (
    np.float32,
    True,
    TypeError,
    r"^fill_value=True \(a bool\) cannot fill float32 data",
  ),
  "int_bool": (
    np.bool_,
    1,
    TypeError,
    r"^fill_value=1 \(an int\) cannot fill bool data",
  ),
  "numpy_float_int32": (
    np.int32,
    np.float32(2),
    TypeError,
    r"^fill_value=2.0 \(a float\) cannot fill int32 data",
  ),
  "string_nan": (
    np.float32,
    "nan",
    TypeError,
    r"^fill_value must be a scalar number, got str 'nan'",
  ),
  "bytes": (
    np.uint8,
    b"1",
    TypeError,
    r"^fill_value must be a scalar number, got bytes b'1'",
  ),
  "object": (
    np.float32,
    object(),
    TypeError,
    r"^fill_value must be a scalar number, got object",
  ),
}
