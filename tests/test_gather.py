"""Gather-8: spec examples, shape rules and their errors, every batch_dims and
axis for ranks 1-5, dtypes, zero-size inputs, out-of-range indices (zeros in
every dtype, eager and jit, concrete or traced, int64 extremes; clip and
promise modes; checkify), vmap of every argument combination, derivatives.

Expected values come from the spec text or from `gs.np_gather`, a loop over
output positions that shares no code with the implementation.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import checkify

import jaxops
from jaxops import shapes
from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support import rejections
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# ---------------------------------------------------------------------------
# The seven examples of the OpenVINO Gather-8 specification, verbatim:
# (data, indices, axis, batch_dims, output).

_BATCH_DATA = [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
SPEC_EXAMPLES = {
  "example1_default": ([1, 2, 3, 4, 5], [0, 0, 4], 0, 0, [1, 1, 5]),
  "example2_batch1": (
    _BATCH_DATA,
    [[0, 0, 4], [4, 0, 0]],
    1,
    1,
    [[1, 1, 5], [10, 6, 6]],
  ),
  "example3_batch2": (
    [_BATCH_DATA, [[11, 12, 13, 14, 15], [16, 17, 18, 19, 20]]],
    [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]],
    2,
    2,
    [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]],
  ),
  "example4_axis_after_batch": (
    np.arange(1, 41).reshape(2, 1, 5, 4).tolist(),
    [[1, 2, 4], [4, 3, 2]],
    2,
    1,
    [
      [[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]],
      [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]],
    ],
  ),
  "example5_negative_batch_dims": (
    _BATCH_DATA,
    [[0, 0, 4], [4, 0, 0]],
    1,
    -1,
    [[1, 1, 5], [10, 6, 6]],
  ),
  "example6_negative_indices": ([1, 2, 3, 4, 5], [0, -2, -1], 0, 0, [1, 4, 5]),
  "example7_out_of_range": ([1, 2, 3, 4, 5], [3, 10, -20], 0, 0, [4, 0, 0]),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_spec_example(name, index_dtype):
  example = SPEC_EXAMPLES[name]
  checks.assert_spec_example(GATHER, example, np.int32, index_dtype, name)


def test_ir_layer_example_shape():
  data_shape, indices_shape = (2, 64, 128), (2, 32, 21)
  assert shapes.gather(data_shape, indices_shape, 1, 1) == (2, 32, 21, 128)
  assert shapes.gather(
    list(data_shape), np.array(indices_shape), np.int64(1), np.int32(1)
  ) == (2, 32, 21, 128)
  out = jax.eval_shape(
    lambda d, i: jaxops.gather(d, i, 1, 1),
    jax.ShapeDtypeStruct(data_shape, jnp.float32),
    jax.ShapeDtypeStruct(indices_shape, jnp.int32),
  )
  assert out.shape == (2, 32, 21, 128) and out.dtype == jnp.float32


def test_scalar_index_drops_the_axis():
  data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  for axis in range(-3, 3):
    for i in (-1, 0, 1):
      out = jaxops.gather(data, np.int32(i), axis)
      assert_same(out, np.take(data, i, axis=axis), f"axis={axis} i={i}")
  assert_same(jaxops.gather(data, 7, 1), np.zeros((2, 4), np.float32))


# ---------------------------------------------------------------------------
# Bad inputs: (data shape, indices shape, axis, batch_dims, exception, regex),
# each through the shape rule and the operator (eager, jit, eval_shape).

BAD_SHAPES = {
  "data_rank0": (
    (),
    (1,),
    0,
    0,
    ValueError,
    r"^data must have rank >= 1, got rank 0 \(data shape \(\), indices "
    r"shape \(1,\)\)",
  ),
  "axis_too_large": (
    (2, 3),
    (4,),
    2,
    0,
    ValueError,
    r"^axis=2 must be in \[-r, r-1\] = \[-2, 1\] for rank r=2 \(data shape "
    r"\(2, 3\), indices shape \(4,\)\)",
  ),
  "axis_too_small": (
    (2, 3),
    (4,),
    -3,
    0,
    ValueError,
    r"^axis=-3 must be in \[-r, r-1\] = \[-2, 1\]",
  ),
  "batch_dims_above_min_rank": (
    (2, 3, 4),
    (2, 3),
    2,
    3,
    ValueError,
    r"^batch_dims=3 must be in \[-min\(rank\(data\), rank\(indices\)\), "
    r"min\(rank\(data\), rank\(indices\)\)\] = \[-2, 2\] \(data shape "
    r"\(2, 3, 4\), indices shape \(2, 3\)\)",
  ),
  "batch_dims_below_minus_min_rank": (
    (2, 3, 4),
    (2, 3),
    2,
    -3,
    ValueError,
    r"^batch_dims=-3 must be in .* = \[-2, 2\]",
  ),
  "batch_dims_greater_than_axis": (
    (2, 3, 4),
    (2, 3),
    0,
    1,
    ValueError,
    r"^batch_dims=1 \(normalized 1\) must be <= axis=0 \(normalized 0\) "
    r"\(data shape \(2, 3, 4\), indices shape \(2, 3\)\)",
  ),
  "negative_batch_dims_greater_than_axis": (
    (2, 3, 4),
    (2, 3),
    -3,
    -1,
    ValueError,
    r"^batch_dims=-1 \(normalized 1\) must be <= axis=-3 \(normalized 0\)",
  ),
  "batch_dims_equal_to_data_rank": (
    (2, 3),
    (2, 3, 4),
    1,
    2,
    ValueError,
    r"^batch_dims=2 \(normalized 2\) must be <= axis=1",
  ),
  "batch_dims_unequal": (
    (2, 3, 4),
    (3, 5),
    1,
    1,
    ValueError,
    r"^the first batch_dims=1 dims of data and indices must be equal, got "
    r"\(2,\) vs \(3,\) \(data shape \(2, 3, 4\), indices shape \(3, 5\)\)",
  ),
  "negative_batch_dims_unequal": (
    (2, 3, 4),
    (2, 4, 5),
    2,
    -1,
    ValueError,
    r"^the first batch_dims=2 dims of data and indices must be equal, got "
    r"\(2, 3\) vs \(2, 4\)",
  ),
  "negative_dim": (
    (2, -1),
    (1,),
    0,
    0,
    ValueError,
    r"^data shape \(2, -1\) has a negative dim",
  ),
  "axis_float": (
    (2, 3),
    (1,),
    1.0,
    0,
    TypeError,
    r"^axis must be an int, got float 1.0",
  ),
  "batch_dims_bool": (
    (2, 3),
    (2,),
    1,
    True,
    TypeError,
    r"^batch_dims must be an int, got bool True",
  ),
  "batch_dims_string": (
    (2, 3),
    (2,),
    1,
    "1",
    TypeError,
    r"^batch_dims must be an int, got str '1'",
  ),
}


@pytest.mark.parametrize("name", BAD_SHAPES)
def test_shape_rule_rejects(name):
  checks.assert_shape_rule_rejects(GATHER, BAD_SHAPES[name])


@pytest.mark.parametrize("name", checks.array_shapes(BAD_SHAPES))
def test_operator_rejects(name):
  checks.assert_operator_rejects(GATHER, BAD_SHAPES[name])


BAD_CALLS = checks.bad_calls(GATHER, (2,))
BAD_CALLS |= {
  "ragged_traced_index_list": (
    lambda: jax.jit(lambda i: jaxops.gather(np.zeros(3), [[i], [i, i]]))(0),
    ValueError,
    rejections.ragged("indices").removeprefix("^"),
  ),
  "clip_on_empty_axis": (
    lambda: jax.jit(lambda d, i: jaxops.gather(d, i, mode="clip"))(
      np.zeros((0, 3)), np.zeros((2,), np.int32)
    ),
    IndexError,
    r"cannot gather along axis=0 of size 0 \(data shape \(0, 3\)\): every "
    r"index is out of range; use mode='fill'",
  ),
  "clip_concrete_out_of_range": (
    lambda: jaxops.gather(np.zeros((2, 3)), np.array([0, 2]), mode="clip"),
    IndexError,
    r"indices\[1\]=2 is out of range for a dim of size 2 \(valid: "
    r"\[-s, s-1\]\)",
  ),
  "promise_concrete_out_of_range": (
    lambda: jaxops.gather(
      np.zeros((2, 3)), np.array([-4]), 1, mode="promise_in_bounds"
    ),
    IndexError,
    r"indices\[0\]=-4 is out of range for a dim of size 3",
  ),
}


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_call(name):
  checks.assert_bad_call(GATHER, BAD_CALLS[name])


# ---------------------------------------------------------------------------
# Every axis and batch_dims for data ranks 1-5 and index ranks b..b+2, with
# negative axes, batch_dims and indices, in range and half out of range.


# (data rank, indices rank, axis, batch_dims) by name.
ALL_CONFIGS = {
  f"r{r}_q{q}_axis{a}_b{b}": (r, q, a, b)
  for r in range(1, 6)
  for b in range(min(r - 1, 3) + 1)
  for a in range(b, r)
  for q in range(b, b + 3)
}


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize("name", ALL_CONFIGS)
def test_every_axis_and_batch_dims(name):
  r, q, a, b = ALL_CONFIGS[name]
  rng = np.random.default_rng([r, q, a, b])
  data_shape = gs.random_dims(rng, r, 2, 4)
  indices_shape = data_shape[:b] + gs.random_dims(rng, q - b, 1, 4)
  data = gen.random_values(rng, data_shape, np.float32)
  indices = gen.half_out_of_range(rng, data_shape[a], indices_shape)
  expected = gs.np_gather(data, indices, a, b)
  # Eager with positive attributes, jit with negative ones where they exist.
  assert_same(jaxops.gather(data, indices, a, b), expected, name)
  # Counted from rank(indices), where the range allows.
  neg_b = b - q if -min(r, q) <= b - q < 0 else b
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, a - r, neg_b))
  assert_same(fn(data, indices), expected, name)
  assert shapes.gather(data_shape, indices.shape, a - r, neg_b) == (
    expected.shape
  )


# ---------------------------------------------------------------------------
# Dtypes.


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_data_dtypes(dtype):
  rng = np.random.default_rng(1)
  data = gen.random_values(rng, (3, 4, 2), dtype)
  indices = gen.half_out_of_range(rng, 4, (3, 5))
  name = gen.dtype_id(dtype)
  for a, b in ((1, 0), (1, 1), (-1, 0)):
    expected = gs.np_gather(data, indices if b else indices[0], a, b)
    got = jaxops.gather(data, indices if b else indices[0], a, b)
    assert_same(got, expected, f"{name} axis={a} b={b}")
    fn = jax.jit(lambda d, i, a=a, b=b: jaxops.gather(d, i, a, b))
    assert_same(fn(data, indices if b else indices[0]), expected, name)


@pytest.mark.parametrize("index_dtype", gen.EVERY_INDEX_DTYPE, ids=gen.dtype_id)
def test_index_dtypes(index_dtype):
  # A dim of 300 > int8 max: negative int8 indices must be widened before
  # the wrap, or i + 300 overflows.
  data = np.arange(600, dtype=np.float32).reshape(300, 2)
  signed = jnp.issubdtype(index_dtype, jnp.signedinteger)
  info = jnp.iinfo(index_dtype)
  values = [0, min(299, int(info.max)), max(-300, int(info.min)), 1]
  if signed:
    values.append(-1)
  indices = np.array(values).astype(index_dtype)
  expected = gs.np_gather(data, indices)
  assert_same(jaxops.gather(data, indices), expected)
  assert_same(jax.jit(jaxops.gather)(data, jnp.asarray(indices)), expected)


# ---------------------------------------------------------------------------
# Zero-size inputs: (data shape, indices shape, axis, batch_dims, output).

ZERO_SIZE = {
  "no_indices": ((3, 4), (0,), 0, 0, (0, 4)),
  "no_indices_axis1": ((3, 4), (2, 0), 1, 0, (3, 2, 0)),
  "empty_slices": ((2, 0), (4,), 0, 0, (4, 0)),
  "empty_axis_no_indices": ((0, 3), (0,), 0, 0, (0, 3)),
  "empty_batch": ((0, 3), (0, 2), 1, 1, (0, 2)),
  "empty_axis_fills": ((2, 0, 3), (2, 4), 1, 1, (2, 4, 3)),
  "empty_axis_scalar_index": ((0, 3), (), 0, 0, (3,)),
}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_size(name):
  checks.assert_zero_size(GATHER, ZERO_SIZE[name], name)


# ---------------------------------------------------------------------------
# Out-of-range indices: zeros, never an error, in every dtype, eager and
# jit, concrete or traced, and never wrapped into range.

OOB_DATA = np.arange(1, 7, dtype=np.float32).reshape(2, 3)

# Index values into dim 1 (size 3), out of range in several ways: past the
# end, below -size, beyond int32 in both directions, values that wrap to
# in-range ones in int32, unsigned huge.
OOB_VALUES = {
  "past_end": (3, np.int32),
  "below_minus_size": (-4, np.int32),
  "int32_max": (2**31 - 1, np.int32),
  "int32_min": (-(2**31), np.int32),
  "int64_2pow32_plus_1": (2**32 + 1, np.int64),
  "int64_2pow33_plus_1": (2**33 + 1, np.int64),
  # After the negative wrap (+3) this is 2 modulo 2**32.
  "int64_wraps_to_2_in_int32": (-(2**32) - 1, np.int64),
  "int64_max": (2**63 - 1, np.int64),
  "int64_min": (-(2**63), np.int64),
  "uint32_max": (2**32 - 1, np.uint32),
  "uint32_2pow31": (2**31, np.uint32),
  "uint64_2pow32_plus_1": (2**32 + 1, np.uint64),
  "uint64_2pow63_plus_1": (2**63 + 1, np.uint64),
  "int8_below": (-128, np.int8),
  "uint8_past_end": (255, np.uint8),
}


def _oob_indices(name):
  value, dtype = OOB_VALUES[name]
  last = -1 if np.issubdtype(dtype, np.signedinteger) else 2
  return np.array([1, value, last], dtype=dtype)


@pytest.mark.parametrize("name", OOB_VALUES)
def test_out_of_range_reads_zero_eagerly(name):
  """Concrete host indices: every value, in both modes (no int32 wrap)."""
  expected = np.array([[2, 0, 3], [5, 0, 6]], np.float32)
  indices = _oob_indices(name)
  assert_same(jaxops.gather(OOB_DATA, indices, 1), expected, name)
  assert_same(
    jaxops.gather(OOB_DATA, indices, 1, fill_value=-7.0),
    np.array([[2, -7, 3], [5, -7, 6]], np.float32),
    name,
  )


@pytest.mark.parametrize("name", gs.wide_only_in_x64(OOB_VALUES))
def test_out_of_range_reads_zero_under_jit(name):
  expected = np.array([[2, 0, 3], [5, 0, 6]], np.float32)
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, 1))
  indices = _oob_indices(name)
  assert_same(fn(OOB_DATA, indices), expected, name)
  assert_same(fn(OOB_DATA, jnp.asarray(indices)), expected, name)
  # Concrete device indices, eagerly.
  assert_same(jaxops.gather(OOB_DATA, jnp.asarray(indices), 1), expected)


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_out_of_range_zero_in_every_dtype(dtype):
  data = gen.random_values(np.random.default_rng(7), (2, 5), dtype)
  indices = np.array([[7, -1, 5], [-6, 0, 2**31 - 1]], np.int32)
  expected = gs.np_gather(data, indices, 1, 1)
  # 0 in the dtype: NaN in float8_e8m0fnu, which has no zero.
  zeros = np.zeros(2, np.int8).astype(dtype)
  assert expected[[0, 1], [0, 2]].tobytes() == zeros.tobytes()
  assert_same(jaxops.gather(data, indices, 1, 1), expected)
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, 1, 1))
  assert_same(fn(data, indices), expected)


# A NumPy int64 index beyond int32 read where a transformation traces it:
# x64 mode reads zero; x32 mode narrows it at the transformation's boundary,
# before jaxops sees it, so 2**33 + 1 is the valid index 1
# (docs/semantics.md#gather-out-of-range). A direct call, the array closed
# over, and an argument grad does not differentiate read zero in both.
_BIG = np.array([2**33 + 1, 1], np.int64)
_X = np.arange(1.0, 4.0, dtype=np.float32)
# name: (call, its result in x64 mode, in x32 mode).
BOUNDARIES = {
  "direct": (lambda: jaxops.gather(_X, _BIG), [0, 2], [0, 2]),
  "closed_over_under_vmap": (
    lambda: jax.vmap(lambda d: jaxops.gather(d, _BIG))(_X[None])[0],
    [0, 2],
    [0, 2],
  ),
  "vmap": (
    lambda: jax.vmap(lambda i: jaxops.gather(_X, i))(_BIG),
    [0, 2],
    [2, 2],
  ),
  "jit": (
    lambda: jax.jit(lambda i: jaxops.gather(_X, i))(_BIG),
    [0, 2],
    [2, 2],
  ),
  # Differentiated with respect to data only, grad passes the indices on.
  "grad": (
    lambda: jax.grad(lambda d, i: jaxops.gather(d, i).sum())(_X, _BIG),
    [0, 1, 0],
    [0, 1, 0],
  ),
  "grad_of_both": (
    lambda: jax.grad(
      lambda d, i: jaxops.gather(d, i).sum(), (0, 1), allow_int=True
    )(_X, _BIG)[0],
    [0, 1, 0],
    [0, 2, 0],
  ),
}


@pytest.mark.parametrize("name", BOUNDARIES)
def test_numpy_int64_indices_at_a_transformation_boundary(name, jax_mode):
  call, x64, x32 = BOUNDARIES[name]
  expected = x64 if jax_mode == "x64" else x32
  assert_same(call(), np.array(expected, np.float32))


# The fill-mode lowerings on CPU (docs/design.md#lowering-fill): one element
# per index (a row gather and a select) and slices (the stacked operand),
# with batch dims, about half of the indices out of range on either side.
# name: (data shape, indices shape, axis, batch_dims)
FILL_CONFIGS = {
  "elements_rank1": ((7,), (9,), 0, 0),
  "elements_batch1": ((3, 7), (3, 6), 1, 1),
  "slices_axis0": ((5, 4), (9,), 0, 0),
  "slices_middle_axis": ((2, 5, 3), (4, 2), 1, 0),
  "slices_batch1_axis2": ((2, 3, 5, 2), (2, 6), 2, 1),
  "embedding": ((50, 8), (4, 6), 0, 0),
}


@pytest.mark.parametrize("name", FILL_CONFIGS)
def test_fill_mode_matches_reference(name):
  data_shape, indices_shape, a, b = FILL_CONFIGS[name]
  rng = np.random.default_rng(5)
  data = gen.random_values(rng, data_shape, np.float32)
  indices = gen.half_out_of_range(rng, data_shape[a], indices_shape, np.int32)
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, a, b, fill_value=-9.0))
  assert_same(fn(data, indices), gs.np_gather(data, indices, a, b, -9.0))
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, a, b))
  assert_same(fn(data, indices), gs.np_gather(data, indices, a, b))


@pytest.mark.parametrize(
  "name",
  gs.wide_only_in_x64(
    OOB_VALUES,
    [
      "past_end",
      "below_minus_size",
      "int64_2pow33_plus_1",
      "uint64_2pow63_plus_1",
    ],
  ),
)
def test_out_of_range_clip(name):
  value, dtype = OOB_VALUES[name]
  clipped = min(max(value, 0), 2)
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, 1, mode="clip"))
  out = fn(OOB_DATA, np.array([value], dtype))
  assert_same(out, OOB_DATA[:, [clipped]], name)


@pytest.mark.exhaustive(default=3)
@checks.checkify_cases(
  OOB_VALUES,
  ["past_end", "below_minus_size", "int64_2pow32_plus_1", "uint32_max"],
)
def test_checkify_reports_out_of_range(mode, name):
  _, dtype = OOB_VALUES[name]
  good, expected = np.array([1, 2], dtype), OOB_DATA[:, [1, 2]]
  checks.assert_checkify_reports(
    GATHER, mode, (1,), OOB_DATA, _oob_indices(name), good, expected
  )


def test_checkify_reports_batched_out_of_range():
  fn = jax.jit(lambda d, i: jaxops.gather(d, i, 1, 1))
  checked = checkify.checkify(fn, errors=checkify.index_checks)
  err, out = checked(OOB_DATA, np.array([[0, 1], [2, 3]]))
  assert err.get() is not None and "out-of-bounds" in err.get(), err.get()
  assert_same(out, np.array([[1, 2], [6, 0]], np.float32))


# ---------------------------------------------------------------------------
# vmap equals a Python loop; every combination of mapped arguments.

VMAP_CONFIGS = {
  # name: (data shape, indices shape, axis, batch_dims, in_axes, out_axes)
  "data_only": ((3, 5, 2), (4,), 1, 0, (0, None), 0),
  "data_only_axis_last": ((5, 3), (4, 2), 0, 0, (1, None), 0),
  "data_only_batch1_out_last": ((2, 3, 4), (2, 5), 1, 1, (2, None), -1),
  "indices_only": ((3, 4), (2, 5), 1, 0, (None, 1), 0),
  "indices_only_batch1": ((3, 4, 2), (5, 3, 2), 1, 1, (None, 0), 1),
  "indices_only_scalar": ((3, 4), (5,), 0, 0, (None, 0), 0),
  "both": ((3, 4, 5), (5, 2), 1, 0, (2, 0), 1),
  "both_batch1": ((3, 5, 4, 2), (3, 2, 5), 2, 1, (1, 2), 0),
  "both_scalar_index": ((6, 4), (6,), 0, 0, (0, 0), 0),
}


@pytest.mark.parametrize("out_of_range", [False, True])
@pytest.mark.parametrize("name", VMAP_CONFIGS)
def test_vmap_equals_loop(name, out_of_range):
  row = VMAP_CONFIGS[name]
  checks.assert_vmap_equals_loop(GATHER, row, out_of_range, name, seed=3)


def test_vmap_of_vmap():
  rng = np.random.default_rng(11)
  data = gen.random_values(rng, (2, 3, 5, 4), np.float32)
  indices = gen.half_out_of_range(rng, 5, (3, 2, 6))
  fn = jax.vmap(jax.vmap(lambda d, i: jaxops.gather(d, i, 0), (0, 0)), (0, 1))
  expected = np.stack(
    [
      np.stack([gs.np_gather(data[x, y], indices[y, x]) for y in range(3)])
      for x in range(2)
    ]
  )
  assert_same(jax.jit(fn)(data, indices), expected)


# ---------------------------------------------------------------------------
# Derivatives.

GRAD_CONFIGS = {
  "axis0": ((4, 5), (3,), 0, 0),
  "axis1_duplicates": ((4, 3), (6,), 1, 0),
  "batch1": ((3, 4, 2), (3, 5), 1, 1),
  "batch2_axis3": ((2, 3, 2, 4), (2, 3, 2), 3, 2),
  "scalar_index": ((4, 3), (), 1, 0),
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("name", GRAD_CONFIGS)
def test_check_grads(name):
  row = GRAD_CONFIGS[name]
  checks.check_derivatives(GATHER, row, seed=4, out_of_range=True)


def test_grad_counts_duplicates_and_ignores_out_of_range():
  # Row 0 twice, row 2 twice (once as -1), and two out-of-range indices.
  indices = np.array([0, 2, 0, 7, -1, -4])
  data = np.arange(6, dtype=np.float64).reshape(3, 2)
  grad, tangent = checks.grad_and_tangent(GATHER, data, indices)
  assert_same(grad, np.array([[2.0, 2.0], [0.0, 0.0], [2.0, 2.0]]))
  ones, zeros = [1.0, 1.0], [0.0, 0.0]
  assert_same(tangent, np.array([ones] * 3 + [zeros, ones, zeros]))


def test_reverse_mode_is_a_scatter_add():
  """The backward pass is a scatter-add of the cotangent into zeros of
  data's shape, with no gather and no select over data (the lean rule)."""
  indices = np.array([[1, 4], [0, 7]])
  data = np.zeros((2, 5), np.float32)
  _, vjp = jax.vjp(lambda d: jaxops.gather(d, indices, 1, 1), data)
  text = str(jax.make_jaxpr(vjp)(np.ones((2, 2), np.float32)))
  assert "scatter-add" in text, text
  assert "gather[" not in text and "select_n" not in text, text
  (grad,) = vjp(np.ones((2, 2), np.float32))
  assert_same(grad, np.array([[0, 1, 0, 0, 1], [1, 0, 0, 0, 0]], np.float32))


def test_integer_data_has_float0_tangent():
  data = np.arange(6, dtype=np.int32).reshape(2, 3)
  primal, tangent = jax.jvp(
    lambda d: jaxops.gather(d, np.array([2, 5]), 1),
    (data,),
    (np.zeros(data.shape, jax.dtypes.float0),),
  )
  assert_same(primal, np.array([[2, 0], [5, 0]], np.int32))
  assert tangent.dtype == jax.dtypes.float0 and tangent.shape == (2, 2)


# ---------------------------------------------------------------------------
# Property test: random cases of every shape class against NumPy, eager and
# under jit.


@checks.random_cases(
  15,
  [np.float32, np.int8, np.bool_, np.complex64],
  [np.int32, np.int64, np.uint8, np.int16],
  out_of_range=st.booleans(),
)
def test_property_matches_numpy(seed, dtype, index_dtype, out_of_range):
  signed = np.issubdtype(index_dtype, np.signedinteger)
  case = gs.random_gather_case(
    seed,
    dtypes=(dtype,),
    index_dtypes=(index_dtype,),
    negative=signed,
    out_of_range=out_of_range and signed,
  )
  checks.assert_case_matches(GATHER, case, jit=True)


def test_matches_jnp_take_in_range():
  """In range, Gather-8 with batch_dims=0 is `jnp.take`."""
  rng = np.random.default_rng(9)
  data = gen.random_values(rng, (3, 4, 5), np.float32)
  for axis, shape in itertools.product((-3, -1, 1), [(), (2, 3)]):
    indices = gen.random_indices(rng, data.shape[axis], shape)
    assert_same(
      jaxops.gather(data, indices, axis),
      np.asarray(jnp.take(data, indices, axis=axis)),
      f"axis={axis}",
    )


# ---------------------------------------------------------------------------
# The export primitive (what jaxops.onnx lowers): one `jaxops_gather` per
# call, kept one primitive under vmap of any argument combination.

EXPORT_VMAP = {
  # name: (data shape, indices shape, axis, batch_dims, in_axes)
  "data_only": ((3, 4, 5), (2, 6), 1, 0, (0, None)),
  "indices_only": ((4, 5), (3, 2, 6), 1, 0, (None, 1)),
  "indices_only_batch1": ((4, 5, 2), (3, 4, 6), 2, 1, (None, 0)),
  "both": ((3, 4, 5), (3, 6), 0, 0, (0, 0)),
  "both_batch1_axis2": ((4, 3, 2, 5), (4, 3, 6), 2, 1, (1, 1)),
}


def _primitive_names(fn, *args):
  return [str(e.primitive) for e in jax.make_jaxpr(fn)(*args).jaxpr.eqns]


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", EXPORT_VMAP)
def test_export_primitive_under_vmap(name):
  from jaxops import _export

  data_shape, indices_shape, a, b, in_axes = EXPORT_VMAP[name]
  rng = np.random.default_rng(12)
  data = gen.random_values(rng, data_shape, np.float32)
  inner = tuple(d for j, d in enumerate(data_shape) if j != in_axes[0])
  indices = gen.half_out_of_range(rng, inner[a], indices_shape)
  fn = jax.vmap(lambda d, i: jaxops.gather(d, i, a, b), in_axes)
  expected = np.asarray(fn(data, indices))
  with _export.exporting():
    names = _primitive_names(fn, data, indices)
    assert names.count("jaxops_gather") == 1, names
    assert "gather" not in names, names
    assert_same(fn(data, indices), expected, name)
    nested = jax.vmap(fn, (0, None))
    stacked = np.stack([data, data + 1])
    names = _primitive_names(nested, stacked, indices)
    assert names.count("jaxops_gather") == 1, names
    got = nested(stacked, indices)
  assert_same(got, np.stack([expected, np.asarray(fn(data + 1, indices))]))
