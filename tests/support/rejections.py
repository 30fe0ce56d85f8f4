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
