"""The checks the three gather operators' tests share.

Gather-8, GatherND-8 and GatherElements-11/13 take data, indices and static
attributes, fill or raise for out-of-range indices, and are tested for the
same behaviour: spec examples, rejected shapes and calls, zero-size inputs,
out-of-range modes under checkify, vmap against a loop, derivatives, random
cases against the NumPy reference and the runtimes. Each operator's file
keeps its own tables and calls these checks with its `Operator`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import checkify
from jax.test_util import check_grads

import jaxops
from jaxops import shapes
from tests.support import gather as gs
from tests.support import generators as gen
from tests.support import rejections
from tests.support.asserts import assert_same


@dataclasses.dataclass(frozen=True)
class Operator:
  name: str  # the operator and version its errors start with
  function: Callable[..., Any]
  shape_rule: Callable[..., Any]
  reference: Callable[..., np.ndarray]  # with `fill=None`, out of range raises
  attrs: tuple[str, ...]  # the static arguments after data and indices
  # The sizes of the dims indices index, of (data shape, indices shape,
  # *attrs): an int, or a tuple for the last axis of indices.
  indexed_sizes: Callable[..., Any]
  # Gather-8 reads zeros out of range, eagerly too; the others raise for
  # concrete out-of-range indices and read NaN (float data) where traced.
  reads_zeros: bool = False

  @property
  def fill(self) -> float:
    """What float data reads out of range by default."""
    return 0.0 if self.reads_zeros else np.nan

  def jitted(self, *attrs: Any, **options: Any) -> Callable[..., Any]:
    """The operator of (data, indices) under `jax.jit`, `attrs` static."""
    return jax.jit(lambda d, i: self.function(d, i, *attrs, **options))


def _axis_size(data_shape, indices_shape, axis, *batch_dims):
  return data_shape[axis]


def _tuple_sizes(data_shape, indices_shape, batch_dims):
  return tuple(data_shape[batch_dims : batch_dims + indices_shape[-1]])


GATHER = Operator(
  "Gather-8",
  jaxops.gather,
  shapes.gather,
  gs.np_gather,
  ("axis", "batch_dims"),
  _axis_size,
  reads_zeros=True,
)
GATHER_ND = Operator(
  "GatherND-8",
  jaxops.gather_nd,
  shapes.gather_nd,
  gs.np_gather_nd,
  ("batch_dims",),
  _tuple_sizes,
)
GATHER_ELEMENTS = Operator(
  "GatherElements-13",
  jaxops.gather_elements,
  shapes.gather_elements,
  gs.np_gather_elements,
  ("axis",),
  _axis_size,
)


# ---------------------------------------------------------------------------
# Values.


def random_indices(
  operator: Operator, rng, data_shape, indices_shape, attrs, out_of_range=False
) -> np.ndarray:
  """Indices of `indices_shape` for data of `data_shape`: valid, or (with
  `out_of_range`) about half of them out of range on either side."""
  sizes = operator.indexed_sizes(data_shape, indices_shape, *attrs)
  if out_of_range:
    return gen.half_out_of_range(rng, sizes, indices_shape)
  lead = indices_shape if np.ndim(sizes) == 0 else indices_shape[:-1]
  return gen.random_indices(rng, sizes, lead)


def assert_gathers(
  operator: Operator, data, indices, attrs, expected, context="", jit=True
) -> None:
  """The operator gives `expected` eagerly and (with `jit`) under `jax.jit`
  with static attributes; its shape rule gives expected's shape."""
  assert_same(operator.function(data, indices, *attrs), expected, context)
  if jit:
    static = tuple(range(2, 2 + len(attrs)))
    jitted = jax.jit(operator.function, static_argnums=static)
    assert_same(jitted(data, indices, *attrs), expected, context)
  shape = operator.shape_rule(np.shape(data), np.shape(indices), *attrs)
  assert shape == np.shape(expected), (shape, context)


def assert_spec_example(
  operator: Operator, row, data_dtype, index_dtype, context: str
) -> None:
  """A spec example `(data, indices, *attrs, output)`: the operator (as
  `assert_gathers` checks it) and the reference give the output."""
  data, indices, *attrs, expected = row
  data = np.asarray(data, data_dtype)
  indices = np.asarray(indices, index_dtype)
  expected = np.asarray(expected, data_dtype)
  assert_gathers(operator, data, indices, attrs, expected, context)
  assert_same(operator.reference(data, indices, *attrs), expected, context)


def assert_grad_counts_reads(
  operator: Operator, data, indices, attrs, context=""
) -> None:
  """The gradient of the sum of the output with respect to float64 data
  counts how often each element is read in range."""
  data = np.asarray(data, np.float64)
  grad = jax.grad(lambda d: operator.function(d, indices, *attrs).sum())(data)
  counts = gs.read_counts(operator.reference, data.shape, indices, *attrs)
  assert_same(grad, counts, context)


def assert_zero_size(operator: Operator, row, context: str) -> None:
  """A zero-size row `(data shape, indices shape, *attrs, output shape)`:
  values, shape rule and gradient, with indices of zeros."""
  data_shape, indices_shape, *attrs, out_shape = row
  data = np.arange(np.prod(data_shape), dtype=np.float64).reshape(data_shape)
  indices = np.zeros(indices_shape, np.int64)
  expected = operator.reference(data, indices, *attrs, fill=operator.fill)
  assert expected.shape == out_shape
  assert_gathers(operator, data, indices, attrs, expected, context)
  assert_grad_counts_reads(operator, data, indices, attrs, context)


def assert_reads_an_empty_dim(
  operator: Operator, data_shape, indices_shape, attrs=()
) -> None:
  """Indices of zeros that all index a dim of size 0: an eager call raises
  for the first, a jitted one fills the output with NaN."""
  data = np.zeros(data_shape, np.float32)
  indices = np.zeros(indices_shape, np.int32)
  zeros = ", ".join("0" * len(indices_shape))
  message = (
    rf"^{re.escape(operator.name)}: indices\[{zeros}\]=0 is out of range"
  )
  with pytest.raises(IndexError, match=message + " for a dim of size 0"):
    operator.function(data, indices, *attrs)
  shape = operator.shape_rule(data_shape, indices_shape, *attrs)
  out = operator.jitted(*attrs)(data, indices)
  assert_same(out, np.full(shape, np.nan, np.float32))


# ---------------------------------------------------------------------------
# Rejected inputs.


def _rejected(gather: Operator, row, **checked) -> None:
  data_shape, indices_shape, *attrs, exc, regex = row
  rejections.assert_rejected(
    gather.name,
    exc,
    regex,
    arrays=((data_shape, np.float32), (indices_shape, np.int32)),
    attrs=dict(zip(gather.attrs, attrs)),
    **checked,
  )


def assert_shape_rule_rejects(operator: Operator, row) -> None:
  """A bad-shape row `(data shape, indices shape, *attrs, exception,
  regex)`: the shape rule raises that error."""
  _rejected(operator, row, shape_rule=operator.shape_rule)


def assert_operator_rejects(operator: Operator, row) -> None:
  """The operator raises a bad-shape row's error eagerly, under `jax.jit` and
  under `jax.eval_shape`."""
  _rejected(operator, row, operator=operator.function)


def array_shapes(bad_shapes: dict) -> list[str]:
  """The names of the bad-shape rows an array can have (no negative dim)."""
  return [name for name in bad_shapes if name != "negative_dim"]


def bad_calls(
  operator: Operator,
  indices_shape,
  float_dtype=jnp.float32,
  mode="wrap",
  fill_value: Any = None,
) -> dict[str, tuple[Callable[[], Any], type[Exception], str]]:
  """The calls every gather rejects alike, {name: (call, exception, regex)}:
  float indices (concrete, listed and traced `float_dtype`), traced
  attributes, an unknown `mode`, an array `fill_value` (default zeros(2)) or
  a traced one, and what a demanding new user tries: data that is not an
  array, ragged index lists, fill values data cannot hold, index lists no
  int64 array holds. Data is (2, 3), indices zeros of `indices_shape`, every
  one in range (so no lowering decides)."""
  f = operator.function
  fill_value = np.zeros(2) if fill_value is None else fill_value
  data = np.zeros((2, 3))
  indices = np.zeros(indices_shape, np.int32)
  integer = "indices must have an integer dtype, got"
  shown = re.escape(str(tuple(indices_shape)))
  calls = {
    "float_indices": (
      lambda: f(data, np.zeros(indices_shape)),
      TypeError,
      rf"{integer} float64 \(indices shape {shown}\)",
    ),
    "bool_indices": (
      lambda: f(data, np.zeros(indices_shape, bool)),
      TypeError,
      rf"{integer} bool",
    ),
    "float_list_indices": (
      lambda: f(data, np.full(indices_shape, 0.5).tolist()),
      TypeError,
      rf"{integer} float64",
    ),
    "traced_float_indices": (
      lambda: jax.jit(f)(data, jnp.zeros(indices_shape, float_dtype)),
      TypeError,
      rf"{integer} {np.dtype(float_dtype).name}",
    ),
  }
  # Attribute k traced, and the ones before it too (all 1).
  for k, attr in enumerate(operator.attrs):
    calls[f"traced_{attr}"] = (
      lambda k=k: jax.jit(f)(data, indices, *[1] * (k + 1)),
      TypeError,
      rf"{attr} must be a static Python int, got a traced value",
    )
  calls |= {
    "unknown_mode": (
      lambda: f(data, indices, mode=mode),
      ValueError,
      rf"mode='{mode}' must be one of \('fill', 'clip', 'promise_in_bounds'\)",
    ),
    "array_fill_value": (
      lambda: f(data, indices, fill_value=fill_value),
      TypeError,
      r"fill_value must be a scalar, got an array of shape "
      + re.escape(str(np.shape(fill_value))),
    ),
    "traced_fill_value": (
      lambda: jax.jit(lambda v: f(data, indices, fill_value=v))(1.0),
      TypeError,
      r"fill_value must be a static scalar, got a traced value",
    ),
    "ragged_index_list": (
      lambda: f(data, rejections.RAGGED_LIST),
      ValueError,
      rejections.ragged("indices").removeprefix("^"),
    ),
  }
  for name, (value, exc, regex) in rejections.BAD_DATA.items():
    calls[f"data_{name}"] = (
      lambda value=value: f(value, indices.tolist()),
      exc,
      regex.removeprefix("^"),
    )
  for name, (dtype, fill, exc, regex) in rejections.BAD_FILL_VALUES.items():
    calls[f"fill_value_{name}"] = (
      lambda dtype=dtype, fill=fill: f(
        np.zeros((2, 3), dtype), indices, fill_value=fill
      ),
      exc,
      regex.removeprefix("^"),
    )
  for name, (index_list, regex) in rejections.BIG_INDEX_LISTS.items():
    calls[f"index_list_{name}"] = (
      lambda index_list=index_list: f(data, index_list),
      IndexError,
      regex.removeprefix("^"),
    )
  return calls


def assert_bad_call(operator: Operator, row) -> None:
  """A bad-call row `(call, exception, regex)` raises that error eagerly
  and under `jax.jit`."""
  call, exc, regex = row
  rejections.assert_rejected_call(operator.name, exc, "^" + regex, call)


# ---------------------------------------------------------------------------
# Out-of-range indices, transformations and derivatives.


def checkify_cases(out_of_range_values: dict, names):
  """Parametrizes a checkify test by every index mode (`mode`) and by the
  rows `names` of an operator's table of out-of-range values (`name`; the
  64-bit ones with x64 only)."""

  def parametrize(test):
    rows = gs.wide_only_in_x64(out_of_range_values, names)
    test = pytest.mark.parametrize("name", rows)(test)
    return pytest.mark.parametrize(
      "mode", ("fill", "clip", "promise_in_bounds")
    )(test)

  return parametrize


def assert_checkify_reports(
  operator: Operator, mode, attrs, data, bad, good, expected
) -> None:
  """In every mode, checkify's index checks report the out-of-range `bad`
  indices and pass the in-range `good` ones, which give `expected`."""
  checked = checkify.checkify(
    operator.jitted(*attrs, mode=mode), errors=checkify.index_checks
  )
  err, _ = checked(data, bad)
  assert err.get() is not None and "out-of-bounds" in err.get(), err.get()
  with pytest.raises(checkify.JaxRuntimeError, match="out of bounds"):
    err.throw()
  err, out = checked(data, good)
  assert err.get() is None
  assert_same(out, expected)


def one_slice_shape(shape, mapped_axis):
  """The shape of one slice along `mapped_axis` (None: the whole shape)."""
  if mapped_axis is None:
    return tuple(shape)
  return tuple(shape[:mapped_axis]) + tuple(shape[mapped_axis + 1 :])


def assert_vmap_equals_loop(
  operator: Operator, row, out_of_range: bool, context: str, seed: int
) -> None:
  """A vmap row `(data shape, indices shape, *attrs, in_axes, out_axes)`:
  `jax.vmap` of the operator equals the reference on each slice, stacked
  along `out_axes`, with random float32 data and indices valid for one slice
  (`out_of_range`: about half out of range, reading the operator's fill;
  where the indices are unmapped, so concrete, an operator that does not
  read zeros raises in an eager call instead)."""
  data_shape, indices_shape, *attrs, in_axes, out_axes = row
  rng = np.random.default_rng(seed)
  data = gen.random_values(rng, data_shape, np.float32)
  slice_shape = one_slice_shape(data_shape, in_axes[0])
  indices = random_indices(
    operator, rng, slice_shape, indices_shape, attrs, out_of_range
  )
  data_axis, indices_axis = in_axes
  n = (
    data.shape[data_axis]
    if data_axis is not None
    else indices.shape[indices_axis]
  )

  def take(x, j, axis):
    return x if axis is None else np.take(x, j, axis)

  fill = operator.fill if out_of_range else None
  loop = [
    operator.reference(
      take(data, j, data_axis),
      take(indices, j, indices_axis),
      *attrs,
      fill=fill,
    )
    for j in range(n)
  ]
  vmapped = jax.vmap(
    lambda d, i: operator.function(d, i, *attrs), in_axes, out_axes
  )
  raises = not operator.reads_zeros and out_of_range and indices_axis is None
  gs.assert_vmapped(
    vmapped,
    (data, indices),
    np.stack(loop, axis=out_axes),
    context,
    raises=rf"^{re.escape(operator.name)}: indices\[" if raises else "",
  )


def check_derivatives(
  operator: Operator, row, seed: int, out_of_range=False
) -> None:
  """A row `(data shape, indices shape, *attrs)`: forward and reverse
  derivatives to second order with respect to random float64 data, jitted,
  against finite differences (indices valid, or with `out_of_range` about
  half out of range)."""
  data_shape, indices_shape, *attrs = row
  rng = np.random.default_rng(seed)
  data = rng.standard_normal(data_shape)
  indices = random_indices(
    operator, rng, data_shape, indices_shape, attrs, out_of_range
  )
  check_grads(
    jax.jit(lambda d: operator.function(d, indices, *attrs)),
    (data,),
    order=2,
    modes=["fwd", "rev"],
  )


def grad_and_tangent(operator: Operator, data, indices, attrs=()):
  """The gradient of the output's sum (filled with 100 out of range) with
  respect to data, and the forward tangent of ones, both jitted."""
  loss = jax.jit(
    lambda d, i: operator.function(d, i, *attrs, fill_value=100.0).sum()
  )
  grad = jax.grad(loss)(data, indices)
  _, tangent = jax.jvp(
    lambda d: operator.jitted(*attrs)(d, indices),
    (data,),
    (np.ones_like(data),),
  )
  return grad, tangent


# ---------------------------------------------------------------------------
# Random cases.


def random_cases(max_examples: int, dtypes, index_dtypes, **more):
  """Hypothesis over a seed, a data dtype and an index dtype (and `more`
  strategies), derandomized, for the `gs.random_*_case` generators."""
  return lambda test: hypothesis.settings(
    max_examples=max_examples, deadline=None, derandomize=True
  )(
    hypothesis.given(
      seed=st.integers(0, 2**32 - 1),
      dtype=st.sampled_from(dtypes),
      index_dtype=st.sampled_from(index_dtypes),
      **more,
    )(test)
  )


def assert_case_matches(operator: Operator, case, jit=False) -> None:
  """A random case (`gs.random_*_case`) against the NumPy reference, eagerly
  and with `jit` under `jax.jit` too."""
  expected = operator.reference(case.data, case.indices, *case.attrs)
  got = operator.function(case.data, case.indices, *case.attrs)
  assert_same(got, expected, case.describe())
  if jit:
    static = tuple(range(2, 2 + len(case.attrs)))
    got = jax.jit(operator.function, static_argnums=static)(
      case.data, case.indices, *case.attrs
    )
    assert_same(got, expected, case.describe())


# The conformance files' random cases: 320 seeds in chunks of 40, each chunk
# one jitted jaxops program and one OpenVINO model.
SEED_CHUNKS = {
  f"seeds_{start}_{start + 39}": range(start, start + 40)
  for start in range(0, 320, 40)
}


def jaxops_outputs(operator: Operator, cases) -> list[np.ndarray]:
  """The operator on every case of a chunk, as one jitted program: one XLA
  compile per chunk instead of one per case (compiles dominate the time)."""
  run_all = jax.jit(
    lambda arrays: [
      operator.function(data, indices, *case.attrs)
      for (data, indices), case in zip(arrays, cases)
    ]
  )
  return [
    np.asarray(out)
    for out in run_all([(case.data, case.indices) for case in cases])
  ]


def openvino_outputs(make_node, cases, kept) -> dict[int, np.ndarray]:
  """The CPU plugin's outputs for the cases at positions `kept`, by
  position, as one model (`make_node(case)` builds one case's graph)."""
  from tests.support import oracles

  outputs = oracles.openvino_cpu_many(
    [make_node(cases[j]) for j in kept],
    [(cases[j].data, cases[j].indices) for j in kept],
  )
  return dict(zip(kept, outputs))


def node_cases(op_type: str) -> dict[str, tuple]:
  """The `onnx` package's node tests of `op_type`: {name: (inputs, output,
  attributes)}."""
  from tests.support import oracles

  return {
    name: (inputs, expected, attrs)
    for name, inputs, expected, attrs in oracles.onnx_node_cases(op_type)
  }


def assert_node_case(operator: Operator, case, name: str) -> None:
  """An ONNX node case through the operator, its ONNX attributes passed by
  name (an absent one is the operator's default)."""
  inputs, expected, attrs = case
  assert_same(operator.function(*inputs, **attrs), expected, name)
