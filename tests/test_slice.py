"""Slice-8: every example of the spec, the runtimes' clamp (where it differs
from Python: docs/semantics.md#sl-1, #sl-2), int64 extremes of every
attribute, axes forms, the trace-time errors, dtypes, ranks 1-5, zero-size
inputs, the lowering (no gather; a pad in reverse mode), vmap, jit and
derivatives, and a property test against `np_slice`.

Expected values come from `tests/support/slicing.np_slice` (the ONNX text's
clamp and Python's `range`) or NumPy indexing, never the code under test.
"""

from __future__ import annotations

import re

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.test_util import check_grads

import jaxops
from jaxops import shapes
from tests.support import generators as gen
from tests.support import rejections
from tests.support.asserts import assert_same
from tests.support.slicing import INT64_MAX, INT64_MIN, np_slice, random_spec

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

OP = "Slice-8"

# ---------------------------------------------------------------------------
# The twelve examples of the OpenVINO Slice-8 specification:
# (data shape, start, stop, step, axes, expected output or shape).

_R10 = list(range(10))
SPEC_EXAMPLES = {
  "example1_basic": ((10,), [1], [8], [1], [0], [1, 2, 3, 4, 5, 6, 7]),
  "example2_axes_default": ((10,), [1], [8], [1], None, [1, 2, 3, 4, 5, 6, 7]),
  "example3_step2": ((10,), [1], [8], [2], [0], [1, 3, 5, 7]),
  "example4_out_of_range": ((10,), [-100], [100], [1], [0], _R10),
  "example5_backward_all": ((10,), [9], [-11], [-1], [0], _R10[::-1]),
  "example6_backward_stop0": ((10,), [9], [0], [-1], [0], _R10[:0:-1]),
  "example7_backward_stop_minus10": ((10,), [9], [-10], [-1], [0], _R10[:0:-1]),
  "example8_backward_step2": ((10,), [9], [-11], [-2], [0], [9, 7, 5, 3, 1]),
  "example9_backward_out_of_range": (
    (10,),
    [100],
    [-100],
    [-1],
    [0],
    _R10[::-1],
  ),
  "example10_2d": ((2, 5), [0, 1], [2, 4], [1, 2], [0, 1], [[1, 3], [6, 8]]),
  "example11_3d_all_axes": (
    (20, 10, 5),
    [0, 0, 0],
    [4, 10, 5],
    [1, 1, 1],
    [0, 1, 2],
    (4, 10, 5),
  ),
  "example12_3d_last_axis_default": (
    (20, 10, 5),
    [0, 0],
    [4, 10],
    [1, 1],
    [0, 1],
    (4, 10, 5),
  ),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
def test_spec_example(name):
  data_shape, start, stop, step, axes, expected = SPEC_EXAMPLES[name]
  x = np.arange(int(np.prod(data_shape)), dtype=np.int32).reshape(data_shape)
  if isinstance(expected, tuple):  # the spec gives the shape only
    expected = x[tuple(slice(0, n) for n in expected)]
  expected = np.asarray(expected, np.int32)
  assert_same(jaxops.slice(x, start, stop, step, axes), expected, name)
  fn = jax.jit(lambda x: jaxops.slice(x, start, stop, step, axes))
  assert_same(fn(x), expected, name)
  assert shapes.slice(data_shape, start, stop, step, axes) == expected.shape
  assert_same(np_slice(x, start, stop, step, axes), expected, name)


# ---------------------------------------------------------------------------
# The clamp: the runtimes' (ONNX) rule, and where Python differs.

# (start, stop, step, elements of [0..4], Python's elements if different)
CLAMPS = {
  "positive_in_range": (1, 4, 1, [1, 2, 3], None),
  "start_below_minus_size": (-9, 2, 1, [0, 1], None),
  "stop_past_end": (3, 99, 1, [3, 4], None),
  "start_equals_stop": (2, 2, 1, [], None),
  "start_after_stop": (4, 1, 2, [], None),
  "negative_both": (-4, -1, 2, [1, 3], None),
  "backward_in_range": (3, 0, -1, [3, 2, 1], None),
  "backward_start_past_end": (99, 1, -2, [4, 2], None),
  "backward_stop_below_minus_size": (2, -99, -1, [2, 1, 0], None),
  "backward_stop_minus_one_is_last": (4, -1, -1, [], None),
  # SL-2: a backward start below -size clamps to element 0; Python slices
  # nothing. The issue's case: start=-5, stop=-5 on 3 elements.
  "backward_start_below_minus_size": (-7, -9, -1, [0], []),
  "backward_start_and_stop_below": (-6, -99, -3, [0], []),
  "backward_start_below_stop_in_range": (-6, 0, -1, [], None),
}


@pytest.mark.parametrize("name", CLAMPS)
def test_clamp(name):
  start, stop, step, want, python = CLAMPS[name]
  x = np.arange(5, dtype=np.int32)
  want = np.array(want, np.int32)
  assert_same(jaxops.slice(x, [start], [stop], [step]), want, name)
  assert_same(np_slice(x, [start], [stop], [step]), want, name)
  expected_python = want if python is None else np.array(python, np.int32)
  assert_same(x[start:stop:step], expected_python, name)


def test_issue_case_differs_from_python():
  x = np.arange(3, dtype=np.float32)
  assert_same(jaxops.slice(x, [-5], [-5], [-1]), np.array([0], np.float32))
  assert x[-5:-5:-1].size == 0


# Every int64 value works: start, stop and step at the limits, as Python
# ints, NumPy int64 arrays and lists of NumPy scalars.
EXTREMES = {
  "min_to_max": (INT64_MIN, INT64_MAX, 1),
  "max_to_min_backward": (INT64_MAX, INT64_MIN, -1),
  "step_max": (0, INT64_MAX, INT64_MAX),
  "step_min": (INT64_MAX, INT64_MIN, INT64_MIN),
  "step_min_from_min": (INT64_MIN, INT64_MIN, INT64_MIN),
  "step_max_from_min": (INT64_MIN, INT64_MAX, INT64_MAX),
  "step_min_to_max": (INT64_MIN, INT64_MAX, INT64_MIN),
  "step_max_to_min": (INT64_MAX, INT64_MIN, INT64_MAX),
  "min_min_backward": (INT64_MIN, INT64_MIN, -1),
  "max_max": (INT64_MAX, INT64_MAX, 1),
  "step_min_plus_one": (-1, INT64_MIN, INT64_MIN + 1),
}


@pytest.mark.parametrize("name", EXTREMES)
def test_int64_extremes(name):
  start, stop, step = EXTREMES[name]
  x = np.arange(10, dtype=np.int32)
  expected = np_slice(x, [start], [stop], [step])
  assert_same(jaxops.slice(x, [start], [stop], [step]), expected, name)
  as_arrays = [np.array([v], np.int64) for v in (start, stop, step)]
  assert_same(jaxops.slice(x, *as_arrays, np.array([0])), expected, name)
  fn = jax.jit(lambda x: jaxops.slice(x, *as_arrays))
  assert_same(fn(x), expected, name)
  assert shapes.slice((10,), [start], [stop], [step]) == expected.shape


def test_int64_extremes_values():
  x = np.arange(10, dtype=np.int32)
  assert_same(jaxops.slice(x, [INT64_MAX], [INT64_MIN], [INT64_MIN]), x[[9]])
  assert_same(jaxops.slice(x, [INT64_MIN], [INT64_MAX], [INT64_MAX]), x[[0]])
  assert_same(jaxops.slice(x, [INT64_MIN], [INT64_MIN], [-1]), x[[0]])
  assert_same(jaxops.slice(x, [INT64_MAX], [INT64_MIN], [-1]), x[::-1])


# ---------------------------------------------------------------------------
# Axes.


def test_axes_forms_agree():
  x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  expected = x[:, 3:0:-2, 1:4]
  for axes in ([1, 2], [-2, -1], (1, -1), np.array([1, 2]), [np.int8(1), 2]):
    got = jaxops.slice(x, [3, 1], [0, 4], [-2, 1], axes)
    assert_same(got, expected, f"axes={axes!r}")
  # The order of axes is free.
  assert_same(jaxops.slice(x, [1, 3], [4, 0], [1, -2], [2, 1]), expected)
  # No axes: 0..M-1; the other dims are kept whole.
  assert_same(jaxops.slice(x, [1], [3], [1]), x[1:3])
  assert_same(jaxops.slice(x, [], [], []), x)
  assert_same(jaxops.slice(x, [], [], [], []), x)


# ---------------------------------------------------------------------------
# Bad inputs: (data shape, start, stop, step, axes, exception, regex).

BAD_SPECS = {
  "data_rank0": (
    (),
    [],
    [],
    [],
    None,
    ValueError,
    r"^data must have rank >= 1, got rank 0 \(data shape \(\)\)",
  ),
  "zero_step": (
    (4, 5),
    [0, 0],
    [4, 5],
    [1, 0],
    None,
    ValueError,
    r"^step\[1\]=0: a step must be nonzero \(step=\[1, 0\]\)",
  ),
  "lengths_differ": (
    (4, 5),
    [0, 0],
    [4],
    [1, 1],
    None,
    ValueError,
    r"^start, stop and step must have one length, got len\(start\)=2, "
    r"len\(stop\)=1, len\(step\)=2",
  ),
  "axes_length_differs": (
    (4, 5),
    [0],
    [4],
    [1],
    [0, 1],
    ValueError,
    r"^axes must have the length of start, got len\(axes\)=2 and "
    r"len\(start\)=1",
  ),
  "repeated_axes": (
    (4, 5, 6),
    [0, 0],
    [1, 1],
    [1, 1],
    [1, -2],
    ValueError,
    r"^axes must be unique, got axes=\[1, -2\] \(data dims \[1\] repeated\) "
    r"\(data shape \(4, 5, 6\)\)",
  ),
  "axis_too_large": (
    (4, 5),
    [0],
    [1],
    [1],
    [2],
    ValueError,
    r"^axes\[0\]=2 must be in \[-r, r-1\] = \[-2, 1\] for rank r=2 "
    r"\(data shape \(4, 5\)\)",
  ),
  "axis_too_small": (
    (4, 5),
    [0, 0],
    [1, 1],
    [1, 1],
    [0, -3],
    ValueError,
    r"^axes\[1\]=-3 must be in \[-r, r-1\] = \[-2, 1\]",
  ),
  "more_values_than_rank": (
    (4,),
    [0, 0],
    [1, 1],
    [1, 1],
    None,
    ValueError,
    r"^len\(start\)=2 must be <= rank\(data\)=1 when axes is not given",
  ),
  "float_start": (
    (4,),
    [0.5],
    [1],
    [1],
    None,
    TypeError,
    r"^start\[0\] must be an int, got float 0.5",
  ),
  "float_array_step": (
    (4,),
    [0],
    [1],
    np.array([1.0]),
    None,
    TypeError,
    r"^step must hold integers, got dtype float64",
  ),
  "bool_stop": (
    (4,),
    [0],
    [True],
    [1],
    None,
    TypeError,
    r"^stop\[0\] must be an int, got bool True",
  ),
  "scalar_start": (
    (4,),
    0,
    [1],
    [1],
    None,
    TypeError,
    r"^start must be a sequence of ints, got int 0",
  ),
  "2d_axes": (
    (4, 5),
    [0],
    [1],
    [1],
    np.array([[0]]),
    ValueError,
    r"^axes must be 1-D, got an array of shape \(1, 1\)",
  ),
  "negative_dim": (
    (2, -1),
    [0],
    [1],
    [1],
    None,
    ValueError,
    r"^data shape \(2, -1\) has a negative dim",
  ),
}


def _rejected(name, **checked):
  data_shape, start, stop, step, axes, exc, regex = BAD_SPECS[name]
  rejections.assert_rejected(
    OP,
    exc,
    regex,
    arrays=((data_shape, np.float32),),
    attrs={"start": start, "stop": stop, "step": step, "axes": axes},
    **checked,
  )


@pytest.mark.parametrize("name", BAD_SPECS)
def test_shape_rule_rejects(name):
  _rejected(name, shape_rule=shapes.slice)


@pytest.mark.parametrize("name", [n for n in BAD_SPECS if n != "negative_dim"])
def test_operator_rejects(name):
  _rejected(name, operator=jaxops.slice)


@pytest.mark.parametrize("argnum", [1, 2, 3, 4])
def test_traced_attributes_say_they_must_be_static(argnum):
  names = ("start", "stop", "step", "axes")
  args = [np.zeros((4, 5), np.float32), [0], [2], [1], [1]]

  def call(value):
    spec = list(args)
    spec[argnum] = value
    return jaxops.slice(*spec)

  rejections.assert_op_error(
    OP,
    TypeError,
    rf"^{names[argnum - 1]} must be static \(a Python sequence of ints or a "
    r"NumPy array\), got a traced value",
    lambda: jax.jit(call)(jnp.array(args[argnum])),
  )


# ---------------------------------------------------------------------------
# Dtypes, ranks 1-5, zero-size inputs.


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_dtypes(dtype):
  x = gen.random_values(np.random.default_rng(1), (4, 6), dtype)
  for spec in (([3, -1], [-9, 0], [-2, -3]), ([1], [5], [2], [1])):
    expected = np_slice(x, *spec)
    assert_same(jaxops.slice(x, *spec), expected, gen.dtype_id(dtype))
    fn = jax.jit(lambda x, spec=spec: jaxops.slice(x, *spec))
    assert_same(fn(x), expected, gen.dtype_id(dtype))


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
@pytest.mark.covering_modes
def test_every_rank_every_axis(rank):
  rng = np.random.default_rng(rank)
  shape = tuple(int(d) for d in rng.integers(2, 5, size=rank))
  x = gen.random_values(rng, shape, np.float32)
  for axis in range(-rank, rank):
    for start, stop, step in ((-1, -99, -2), (1, 99, 2), (-99, -1, 1)):
      expected = np_slice(x, [start], [stop], [step], [axis])
      got = jaxops.slice(x, [start], [stop], [step], [axis])
      assert_same(got, expected, f"{shape} axis={axis}")


ZERO_SIZE = {
  # name: (data shape, start, stop, step, axes, output shape)
  "empty_dim_forward": ((0, 3), [0], [5], [1], None, (0, 3)),
  "empty_dim_backward": ((0, 3), [5], [-5], [-1], None, (0, 3)),
  "empty_other_dim": ((2, 0), [1], [2], [1], [0], (1, 0)),
  "empty_result": ((4, 3), [3], [3], [-1], [1], (4, 0)),
  "empty_result_backward_start_below": ((4, 3), [-9], [0], [-1], [0], (0, 3)),
}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_size(name):
  data_shape, start, stop, step, axes, out_shape = ZERO_SIZE[name]
  x = np.ones(data_shape, np.float32)
  expected = np_slice(x, start, stop, step, axes)
  assert expected.shape == out_shape
  assert shapes.slice(data_shape, start, stop, step, axes) == out_shape
  assert_same(jaxops.slice(x, start, stop, step, axes), expected, name)
  fn = jax.jit(lambda x: jaxops.slice(x, start, stop, step, axes))
  assert_same(fn(x), expected, name)
  grad = jax.grad(lambda x: fn(x).sum())(x)
  assert_same(grad, np.zeros(data_shape, np.float32), name)


# ---------------------------------------------------------------------------
# The lowering: slice, rev; in reverse mode a pad, no gather or scatter.


def test_lowers_without_gather_and_transposes_to_pad():
  x = np.ones((6, 5, 4), np.float32)

  def f(x):
    return jaxops.slice(x, [-1, 1], [-20, 5], [-3, 2], [0, 2])

  def loss(x):
    return jnp.sum(jnp.sin(f(x)))

  for fn in (f, jax.grad(loss), jax.jacfwd(f)):
    text = str(jax.make_jaxpr(fn)(x))
    assert not re.search(r"\b(gather|scatter\w*)\[", text), text
    compiled = jax.jit(fn).lower(x).compile().as_text()
    assert not re.search(r"\b(gather|scatter)\(", compiled)
  text = str(jax.make_jaxpr(f)(x))
  assert re.search(r"\bslice\[", text) and re.search(r"\brev\[", text)
  assert re.search(r"\bpad\[", str(jax.make_jaxpr(jax.grad(loss))(x)))


def test_full_slice_is_free():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  text = str(jax.make_jaxpr(lambda x: jaxops.slice(x, [0], [99], [1]))(x))
  assert not re.search(r"\b(slice|rev|reshape)\[", text), text


# ---------------------------------------------------------------------------
# vmap, derivatives.

TRANSFORM_SPECS = {
  "forward": ([1, 0], [3, 5], [1, 2], [0, 1]),
  "backward_clamped": ([-9, -1], [-99, 0], [-1, -2], [-1, 0]),
  "one_axis_int64_step": ([INT64_MAX], [INT64_MIN], [INT64_MIN], [1]),
}


@pytest.mark.parametrize("name", TRANSFORM_SPECS)
@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (1, 0), (-1, 2), (2, -1)])
def test_vmap_matches_loop(name, in_axes, out_axes):
  spec = TRANSFORM_SPECS[name]
  x = gen.random_values(np.random.default_rng(2), (3, 4, 5), np.float32)
  fn = jax.vmap(lambda x: jaxops.slice(x, *spec), in_axes, out_axes)
  loop = [
    np_slice(np.take(x, j, in_axes), *spec) for j in range(x.shape[in_axes])
  ]
  expected = np.stack(loop, axis=out_axes)
  assert_same(fn(x), expected, name)
  assert_same(jax.jit(fn)(x), expected, name)


@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("name", TRANSFORM_SPECS)
def test_check_grads(name):
  spec = TRANSFORM_SPECS[name]
  x = np.random.default_rng(3).standard_normal((4, 5))
  check_grads(
    jax.jit(lambda x: jaxops.slice(x, *spec)),
    (x,),
    order=2,
    modes=["fwd", "rev"],
  )


@pytest.mark.parametrize("name", TRANSFORM_SPECS)
def test_grad_marks_the_selected_elements(name):
  spec = TRANSFORM_SPECS[name]
  x = np.zeros((4, 5), np.float32)
  grad = jax.grad(lambda x: jaxops.slice(x, *spec).sum())(x)
  ids = np.arange(20).reshape(4, 5)
  selected = np.zeros(20, np.float32)
  selected[np_slice(ids, *spec).ravel()] = 1
  assert_same(grad, selected.reshape(4, 5), name)


def test_integer_data_gets_float0_tangent():
  x = np.arange(6, dtype=np.int32)
  primal, tangent = jax.jvp(
    lambda x: jaxops.slice(x, [-1], [0], [-2]),
    (x,),
    (np.zeros(6, jax.dtypes.float0),),
  )
  assert_same(primal, np.array([5, 3, 1], np.int32))
  assert tangent.dtype == jax.dtypes.float0 and tangent.shape == (3,)


# ---------------------------------------------------------------------------
# Property test: random specs (ranks 1-5, random axes, in- and out-of-range
# starts and stops, int64 limits) against np_slice.


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
@hypothesis.given(seed=st.integers(0, 2**32 - 1))
def test_property_matches_reference(seed):
  spec = random_spec(np.random.default_rng(seed))
  x = np.arange(int(np.prod(spec.data_shape)), dtype=np.int16).reshape(
    spec.data_shape
  )
  args = (spec.start, spec.stop, spec.step, spec.axes)
  expected = np_slice(x, *args)
  assert_same(jaxops.slice(x, *args), expected, spec.describe())
  assert shapes.slice(spec.data_shape, *args) == expected.shape


# ---------------------------------------------------------------------------
# The export primitive (what jaxops.onnx lowers): one `jaxops_slice`, with
# the attributes as int tuples and axes normalized, under nested vmap too.


def test_export_primitive_and_its_batching():
  from jaxops import _export

  x = gen.random_values(np.random.default_rng(4), (2, 3, 4, 5), np.float32)

  def f(x):
    return jaxops.slice(x, [INT64_MAX, -9], [INT64_MIN, 4], [-2, 3], [-1, 0])

  expected = np.stack([np.asarray(f(x[j])) for j in range(2)])
  with _export.exporting():
    jaxpr = jax.make_jaxpr(f)(x[0]).jaxpr
    (eqn,) = jaxpr.eqns
    assert str(eqn.primitive) == "jaxops_slice"
    assert eqn.params == {
      "batch_ndim": 0,
      "start": (INT64_MAX, -9),
      "stop": (INT64_MIN, 4),
      "step": (-2, 3),
      "axes": (2, 0),
    }
    for fn, arg, want in (
      (jax.vmap(f), x, expected),
      (jax.vmap(f, 1, 2), np.moveaxis(x, 0, 1), np.moveaxis(expected, 0, 2)),
      (jax.vmap(jax.vmap(f)), x[None], expected[None]),
    ):
      names = [str(e.primitive) for e in jax.make_jaxpr(fn)(arg).jaxpr.eqns]
      assert names.count("jaxops_slice") == 1 and "slice" not in names, names
      assert_same(fn(arg), want)
