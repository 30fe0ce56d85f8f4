"""GatherND-8: spec examples, shape rules and their errors, every batch_dims
and tuple length, dtypes, zero-size inputs, out-of-range indices (modes,
checkify, eager IndexError), vmap, jit and derivatives.

Expected values come from the spec text or from `gs.np_gather_nd`,
a loop over output positions that shares no code with the implementation.
"""

from __future__ import annotations

import functools
import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxops
from jaxops import shapes
from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER_ND

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# ---------------------------------------------------------------------------
# The seven examples of the OpenVINO GatherND-8 specification, verbatim.

DATA_2X2 = [[1, 2], [3, 4]]
DATA_2X3X4 = [
  [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
  [[13, 14, 15, 16], [17, 18, 19, 20], [21, 22, 23, 24]],
]

SPEC_EXAMPLES = {
  "example1_elements": (DATA_2X2, [[0, 0], [1, 0]], 0, [1, 3]),
  "example2_slices": (DATA_2X2, [[1], [0]], 0, [[3, 4], [1, 2]]),
  "example3_leading_dims": (DATA_2X2, [[[1]], [[0]]], 0, [[[3, 4]], [[1, 2]]]),
  "example4_batch1_elements": (DATA_2X2, [[1], [0]], 1, [2, 3]),
  "example5_batch1_slices": (
    DATA_2X3X4,
    [[1], [0]],
    1,
    [[5, 6, 7, 8], [13, 14, 15, 16]],
  ),
  "example6_batch2": (
    DATA_2X3X4,
    [[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]],
    2,
    [[[2], [5], [11]], [[13], [19], [23]]],
  ),
  "example7_batch3": (
    [[[[1, 2, 3, 4], [5, 6, 7, 8]], [[9, 10, 11, 12], [13, 14, 15, 16]]]],
    [[[[1], [0]], [[3], [2]]]],
    3,
    [[[2, 5], [12, 15]]],
  ),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_spec_example(name, index_dtype):
  example = SPEC_EXAMPLES[name]
  checks.assert_spec_example(GATHER_ND, example, np.int32, index_dtype, name)


# The three IR <layer> examples: (data shape, indices shape, batch_dims, out).
IR_LAYER_EXAMPLES = {
  "layer_batch0": ((1000, 256, 10, 15), (25, 125, 3), 0, (25, 125, 15)),
  "layer_batch2": ((30, 2, 100, 35), (30, 2, 3, 1), 2, (30, 2, 3, 35)),
  "layer_batch3": ((1, 64, 64, 320), (1, 64, 64, 1, 1), 3, (1, 64, 64, 1)),
}


@pytest.mark.parametrize("name", IR_LAYER_EXAMPLES)
def test_ir_layer_example_shapes(name):
  data_shape, indices_shape, batch_dims, expected = IR_LAYER_EXAMPLES[name]
  assert shapes.gather_nd(data_shape, indices_shape, batch_dims) == expected
  assert (
    shapes.gather_nd(
      list(data_shape), np.array(indices_shape), np.int64(batch_dims)
    )
    == expected
  )
  out = jax.eval_shape(
    lambda d, i: jaxops.gather_nd(d, i, batch_dims),
    jax.ShapeDtypeStruct(data_shape, jnp.float32),
    jax.ShapeDtypeStruct(indices_shape, jnp.int32),
  )
  assert out.shape == expected and out.dtype == jnp.float32


# ---------------------------------------------------------------------------
# Bad inputs: (data shape, indices shape, batch_dims, exception, regex). Each
# runs through the shape rule and through the operator (via eval_shape).

BAD_SHAPES = {
  "data_rank0": (
    (),
    (1,),
    0,
    ValueError,
    r"data must have rank >= 1, got rank 0 \(data shape \(\), "
    r"indices shape \(1,\)\)",
  ),
  "indices_rank0": (
    (2,),
    (),
    0,
    ValueError,
    r"indices must have rank >= 1, got rank 0 "
    r"\(data shape \(2,\), indices shape \(\)\)",
  ),
  "batch_dims_negative": (
    (2, 3),
    (2, 1),
    -1,
    ValueError,
    r"batch_dims=-1 must be >= 0 \(data shape \(2, 3\)",
  ),
  "batch_dims_not_below_indices_rank": (
    (2, 3, 4),
    (2, 1),
    2,
    ValueError,
    r"batch_dims=2 must be < rank\(indices\)=2 \(data shape \(2, 3, 4\), "
    r"indices shape \(2, 1\)\)",
  ),
  "batch_dims_not_below_data_rank": (
    (2, 3),
    (2, 3, 1),
    2,
    ValueError,
    r"batch_dims=2 must be < rank\(data\)=2 \(data shape \(2, 3\), "
    r"indices shape \(2, 3, 1\)\)",
  ),
  "batch_dims_unequal": (
    (2, 3, 4),
    (3, 1),
    1,
    ValueError,
    r"the first batch_dims=1 dims of data and indices must be equal, got "
    r"\(2,\) vs \(3,\) \(data shape \(2, 3, 4\), indices shape \(3, 1\)\)",
  ),
  "batch_dims_unequal_second": (
    (2, 3, 4),
    (2, 4, 1),
    2,
    ValueError,
    r"the first batch_dims=2 dims of data and indices must be equal, got "
    r"\(2, 3\) vs "
    r"\(2, 4\)",
  ),
  "tuple_longer_than_rank": (
    (2, 3),
    (4, 3),
    0,
    ValueError,
    r"indices.shape\[-1\]=3 \+ batch_dims=0 must be <= rank\(data\)=2 "
    r"\(data shape \(2, 3\), indices shape \(4, 3\)\)",
  ),
  "tuple_plus_batch_longer_than_rank": (
    (2, 3, 4),
    (2, 3),
    1,
    ValueError,
    r"indices.shape\[-1\]=3 \+ batch_dims=1 must be <= rank\(data\)=3",
  ),
  "negative_dim": (
    (2, -1),
    (1, 1),
    0,
    ValueError,
    r"data shape \(2, -1\) has a negative dim",
  ),
  "batch_dims_float": (
    (2, 3),
    (2, 1),
    1.0,
    TypeError,
    r"batch_dims must be an int, got float 1.0",
  ),
  "batch_dims_bool": (
    (2, 3),
    (2, 1),
    True,
    TypeError,
    r"batch_dims must be an int, got bool True",
  ),
  "batch_dims_string": (
    (2, 3),
    (2, 1),
    "1",
    TypeError,
    r"batch_dims must be an int, got str '1'",
  ),
}


@pytest.mark.parametrize("name", BAD_SHAPES)
def test_shape_rule_rejects(name):
  checks.assert_shape_rule_rejects(GATHER_ND, BAD_SHAPES[name])


@pytest.mark.parametrize("name", checks.array_shapes(BAD_SHAPES))
def test_operator_rejects(name):
  checks.assert_operator_rejects(GATHER_ND, BAD_SHAPES[name])


BAD_CALLS = checks.bad_calls(GATHER_ND, (2, 1))
BAD_CALLS["clip_on_empty_indexed_dim"] = (
  lambda: jax.jit(lambda d, i: jaxops.gather_nd(d, i, mode="clip"))(
    np.zeros((0, 3)), np.zeros((2, 1), np.int32)
  ),
  IndexError,
  r"cannot gather from data of shape \(0, 3\): an indexed dim has size 0",
)


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_call(name):
  checks.assert_bad_call(GATHER_ND, BAD_CALLS[name])


# ---------------------------------------------------------------------------
# Every allowed batch_dims and tuple length, for data ranks 1-4 and indices
# ranks 1-3, with negative indices.


# (data rank, indices rank, batch_dims, tuple length) by name.
ALL_CONFIGS = {
  f"r{r}_q{q}_b{b}_k{k}": (r, q, b, k)
  for r, q in itertools.product(range(1, 5), range(1, 4))
  for b in range(min(r, q))
  for k in range(r - b + 1)
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", ALL_CONFIGS)
def test_every_batch_dims_and_tuple_length(name):
  r, q, b, k = ALL_CONFIGS[name]
  rng = np.random.default_rng([r, q, b, k])
  data_shape = gs.random_dims(rng, r, 2, 5)
  lead = data_shape[:b] + gs.random_dims(rng, q - 1 - b, 1, 4)
  data = gen.random_values(rng, data_shape, np.float32)
  indices = gen.random_indices(rng, data_shape[b : b + k], lead)
  expected = gs.np_gather_nd(data, indices, b)
  # Eager only: jit runs the same lax.gather (covered by the other tests).
  checks.assert_gathers(
    GATHER_ND, data, indices, (b,), expected, name, jit=False
  )


def test_negative_indices_count_from_the_end():
  data = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
  negative = np.array([[-1, -3], [-2, -1]])
  positive = np.array([[1, 0], [0, 2]])
  assert_same(
    jaxops.gather_nd(data, negative),
    np.asarray(jaxops.gather_nd(data, positive)),
  )
  assert_same(jaxops.gather_nd(data, negative), data[[1, 0], [0, 2]])


# ---------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_data_dtypes(dtype):
  rng = np.random.default_rng(1)
  data = gen.random_values(rng, (3, 4, 2), dtype)
  indices = gen.random_indices(rng, (3, 4), (5,))
  expected = gs.np_gather_nd(data, indices)
  name = gen.dtype_id(dtype)
  assert_same(jaxops.gather_nd(data, indices), expected, name)
  assert_same(
    jax.jit(jaxops.gather_nd)(jnp.asarray(data), indices), expected, name
  )
  batched = gen.random_indices(rng, (4,), (3, 2))
  assert_same(
    jaxops.gather_nd(data, batched, 1), gs.np_gather_nd(data, batched, 1), name
  )


@pytest.mark.parametrize("index_dtype", gen.EVERY_INDEX_DTYPE, ids=gen.dtype_id)
def test_index_dtypes(index_dtype):
  rng = np.random.default_rng(2)
  # A dim of 300 > int8 max: negative int8 indices must be widened before
  # the wrap, or i + 300 overflows.
  data = gen.random_values(rng, (300, 3), np.float32)
  signed = jnp.issubdtype(index_dtype, jnp.signedinteger)
  info = jnp.iinfo(index_dtype)
  top = min(300, int(info.max) + 1)
  values = np.array(
    [[0, 2], [top - 1, -1 if signed else 1], [max(-300, int(info.min)), 0]]
  )
  indices = values.astype(index_dtype)
  expected = gs.np_gather_nd(data, indices)
  assert_same(jaxops.gather_nd(data, indices), expected)
  assert_same(jax.jit(jaxops.gather_nd)(data, jnp.asarray(indices)), expected)


# ---------------------------------------------------------------------------
# Zero-size inputs: (data shape, indices shape, batch_dims, output shape).

ZERO_SIZE = {
  "no_index_tuples": ((3, 4), (0, 1), 0, (0, 4)),
  "no_index_tuples_k2": ((3, 4), (2, 0, 2), 0, (2, 0)),
  "empty_slices": ((2, 0), (4, 1), 0, (4, 0)),
  "empty_indexed_dim_no_tuples": ((0, 3), (0, 1), 0, (0, 3)),
  "empty_batch": ((0, 3), (0, 1), 1, (0,)),
  "empty_tuple_k0": ((2, 3), (4, 0), 0, (4, 2, 3)),
  "empty_tuple_k0_batch": ((2, 3, 4), (2, 3, 0), 2, (2, 3, 4)),
  "empty_data_k0": ((0, 3), (2, 0), 0, (2, 0, 3)),
}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_size(name):
  checks.assert_zero_size(GATHER_ND, ZERO_SIZE[name], name)


def test_zero_size_indexed_dim_with_tuples():
  """Every tuple indexes an empty dim: eager raises, jit fills."""
  checks.assert_reads_an_empty_dim(GATHER_ND, (0, 3), (2, 1))


# ---------------------------------------------------------------------------
# Out-of-range indices.

OOB_DATA = np.arange(1, 7, dtype=np.float32).reshape(2, 3)


# Index tuples into a (2, 3) array, one per row: in range, then out of range
# in several ways (past the end, below -size, beyond int32 in both
# directions, values that wrap to in-range ones in int32, unsigned huge).
OOB_TUPLES = {
  "past_end_dim0": ([2, 0], np.int32),
  "past_end_dim1": ([0, 3], np.int32),
  "below_minus_size": ([-3, 0], np.int32),
  "int64_2pow32_plus_1": ([2**32 + 1, 0], np.int64),
  # After the negative wrap (+2) this is 1 modulo 2**32.
  "int64_wraps_to_1_in_int32": ([-(2**32) - 1, 0], np.int64),
  "int64_max": ([2**63 - 1, 0], np.int64),
  "int64_min": ([-(2**63), 0], np.int64),
  "uint32_max": ([2**32 - 1, 0], np.uint32),
  "uint32_2pow31": ([2**31, 0], np.uint32),
  "uint64_2pow32_plus_1": ([2**32 + 1, 0], np.uint64),
  "uint64_2pow63_plus_1": ([2**63 + 1, 0], np.uint64),
  "int8_below": ([-128, 0], np.int8),
  "uint8_past_end": ([255, 1], np.uint8),
}


@pytest.mark.parametrize("name", gs.wide_only_in_x64(OOB_TUPLES))
def test_out_of_range_fill_never_reads_data(name):
  values, dtype = OOB_TUPLES[name]
  # The last tuple reads element (1, 2), as negative indices where possible.
  last = [-1, -1] if np.issubdtype(dtype, np.signedinteger) else [1, 2]
  indices = np.array([[1, 1], values, last], dtype=dtype)
  out = GATHER_ND.jitted()(OOB_DATA, indices)
  assert_same(out, np.array([5, np.nan, 6], np.float32), name)
  out = GATHER_ND.jitted(fill_value=-7.0)(OOB_DATA, indices)
  assert_same(out, np.array([5, -7, 6], np.float32), name)
  with pytest.raises(IndexError, match=r"^GatherND-8: indices\[1, \d\]="):
    jaxops.gather_nd(OOB_DATA, indices)


@pytest.mark.parametrize(
  "name",
  gs.wide_only_in_x64(
    OOB_TUPLES,
    [
      "int64_2pow32_plus_1",
      "uint64_2pow63_plus_1",
      "past_end_dim1",
      "uint32_max",
    ],
  ),
)
def test_out_of_range_clip(name):
  values, dtype = OOB_TUPLES[name]
  indices = np.array([values], dtype=dtype)
  clipped = tuple(min(max(v, 0), s - 1) for v, s in zip(values, (2, 3)))
  expected = OOB_DATA[clipped][None]
  assert_same(GATHER_ND.jitted(mode="clip")(OOB_DATA, indices), expected, name)


# The fill-mode lowerings on CPU (docs/design.md#lowering-fill): one element
# per tuple (a row gather and a select) and slices (the stacked operand),
# with batch dims, unequal indexed sizes and about half of the tuples out of
# range on either side (under vmap: test_vmap_equals_loop).
# name: (data shape, indices shape, batch_dims)
FILL_CONFIGS = {
  "elements_unequal_sizes": ((3, 5, 7), (9, 3), 0),
  "elements_batch1": ((2, 5, 7), (2, 6, 2), 1),
  "elements_batch2_k1": ((2, 3, 7), (2, 3, 5, 1), 2),
  "slices_unequal_sizes": ((3, 5, 4), (9, 2), 0),
  "slices_batch1": ((2, 5, 7, 3), (2, 6, 2), 1),
}


def _fill_case(rng, data_shape, indices_shape, b):
  """Data, and indices with about half the tuples out of range."""
  sizes = data_shape[b : b + indices_shape[-1]]
  data = gen.random_values(rng, data_shape, np.float32)
  return data, gen.half_out_of_range(rng, sizes, indices_shape, np.int32)


@pytest.mark.parametrize("name", FILL_CONFIGS)
def test_fill_mode_matches_reference(name):
  data_shape, indices_shape, b = FILL_CONFIGS[name]
  data, indices = _fill_case(np.random.default_rng(5), *FILL_CONFIGS[name])
  fn = jax.jit(lambda d, i: jaxops.gather_nd(d, i, b, fill_value=-9.0))
  expected = gs.np_gather_nd(data, indices, b, fill=-9.0)
  assert_same(fn(data, indices), expected, name)
  assert_same(
    jax.jit(lambda d, i: jaxops.gather_nd(d, i, b))(data, indices),
    gs.np_gather_nd(data, indices, b, fill=np.nan),
    name,
  )


@pytest.mark.parametrize(
  "dtype,fill",
  [
    (np.float32, np.nan),
    (np.int32, np.iinfo(np.int32).min),
    (np.uint8, 255),
    (np.bool_, True),
    (np.complex64, np.nan),
  ],
)
def test_default_fill_values(dtype, fill):
  data = np.zeros((2, 3), dtype)
  out = GATHER_ND.jitted()(data, np.array([[5, 0]]))
  assert_same(out, np.array([fill], dtype))


def test_eager_index_error_message():
  with pytest.raises(
    IndexError,
    match=re.escape(
      "GatherND-8: indices[1, 1]=3 is out of range for a dim of size 3 "
      "(valid: [-s, s-1])"
    ),
  ):
    jaxops.gather_nd(OOB_DATA, np.array([[0, 0], [0, 3]]))
  with pytest.raises(
    IndexError,
    match=re.escape(
      "indices[0, 0]=9223372036854775813 is out of range for a dim of size 2"
    ),
  ):
    jaxops.gather_nd(OOB_DATA, np.array([[2**63 + 5, 0]], np.uint64))
  with pytest.raises(IndexError, match=re.escape("indices[0, 0]=-3")):
    jaxops.gather_nd(jnp.asarray(OOB_DATA), jnp.array([[-3, 0]]))


@checks.checkify_cases(
  OOB_TUPLES,
  [
    "past_end_dim0",
    "below_minus_size",
    "int64_2pow32_plus_1",
    "uint64_2pow63_plus_1",
  ],
)
def test_checkify_reports_out_of_range(mode, name):
  values, dtype = OOB_TUPLES[name]
  bad = np.array([[1, 1], values], dtype=dtype)
  # Tuple (1, 0), as a negative index where possible.
  row = -1 if np.issubdtype(dtype, np.signedinteger) else 1
  good = np.array([[1, 1], [row, 0]], dtype=dtype)
  expected = np.array([5, 4], np.float32)
  checks.assert_checkify_reports(
    GATHER_ND, mode, (), OOB_DATA, bad, good, expected
  )


# ---------------------------------------------------------------------------
# vmap equals a Python loop; every combination of mapped arguments.

VMAP_CONFIGS = {
  # name: (data shape, indices shape, batch_dims, in_axes, out_axes); the
  # last axis of indices (the tuples) is never the mapped one.
  "data_only_axis1": ((3, 5, 2), (4, 1), 0, (1, None), 0),
  "indices_only_axis1": ((3, 4), (2, 5, 2), 0, (None, 1), 0),
  "indices_only_middle_axis": ((3, 4), (2, 5, 3, 1), 0, (None, 1), 1),
  "both_axes_2_0": ((3, 4, 5), (5, 2, 1), 0, (2, 0), 1),
  "both_batch1": ((3, 5, 4, 2), (3, 2, 5, 1), 1, (1, 2), 0),
  "data_only_batch2_out_last": ((2, 3, 4, 5), (2, 3, 1), 2, (3, None), -1),
  "both_elements_unequal_sizes": ((3, 5, 7), (3, 6, 2), 0, (0, 0), 0),
  "both_elements_batch1": ((4, 2, 5, 7), (4, 2, 6, 2), 1, (0, 0), 0),
}


@pytest.mark.parametrize("out_of_range", [False, True])
@pytest.mark.parametrize("name", VMAP_CONFIGS)
def test_vmap_equals_loop(name, out_of_range):
  row = VMAP_CONFIGS[name]
  checks.assert_vmap_equals_loop(GATHER_ND, row, out_of_range, name, seed=3)


# ---------------------------------------------------------------------------
# Derivatives.

GRAD_CONFIGS = {
  "elements": ((4, 5), (3, 2), 0),
  "slices_with_duplicates": ((4, 3), (6, 1), 0),
  "batch1": ((3, 4, 2), (3, 2, 1), 1),
  "batch2_leading": ((2, 3, 4), (2, 3, 2, 1), 2),
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("name", GRAD_CONFIGS)
def test_check_grads(name):
  checks.check_derivatives(GATHER_ND, GRAD_CONFIGS[name], seed=4)


def test_grad_counts_duplicates_and_ignores_out_of_range():
  # Row 0 twice, row 2 twice (once as -1), and one out-of-range tuple.
  indices = np.array([[0], [2], [0], [7], [-1]])
  data = np.arange(6, dtype=np.float64).reshape(3, 2)
  grad, tangent = checks.grad_and_tangent(GATHER_ND, data, indices)
  assert_same(grad, np.array([[2.0, 2.0], [0.0, 0.0], [2.0, 2.0]]))
  assert_same(tangent, np.array([[1.0, 1.0]] * 3 + [[0.0, 0.0]] + [[1.0, 1.0]]))


# ---------------------------------------------------------------------------
# Property test: random valid cases of every shape class against NumPy.


@checks.random_cases(
  20,
  [np.float32, np.int8, np.bool_, np.complex64],
  [np.int32, np.int64, np.uint8],
)
def test_property_matches_numpy(seed, dtype, index_dtype):
  signed = np.issubdtype(index_dtype, np.signedinteger)
  case = gs.random_gather_nd_case(
    seed, dtypes=(dtype,), index_dtypes=(index_dtype,), negative=signed
  )
  checks.assert_case_matches(GATHER_ND, case)


# NumPy arrays have at most 64 dims; JAX's more, and so do the operators'
# inputs (the index work never makes a NumPy array of an input's rank).
@pytest.mark.parametrize("mode", ["fill", "clip"])
@pytest.mark.parametrize("rank", [64, 65])
def test_rank_64_and_65(rank, mode):
  data = jnp.arange(2, dtype=jnp.float32).reshape((2,) + (1,) * (rank - 1))
  indices = jnp.ones((1,) * (rank - 1) + (1,), jnp.int32)
  eager = functools.partial(jaxops.gather_nd, mode=mode)
  for call in (eager, jax.jit(eager)):
    out = call(data, indices)
    assert out.shape == (1,) * (2 * rank - 2)
    assert_same(out.reshape(-1), np.array([1], np.float32))
