"""GatherElements-11/13: spec examples (with the -11 bracket erratum), shape
rules and their errors, negative axes and indices, smaller indices dims (no
broadcasting), dtypes, zero-size inputs, out-of-range indices (modes,
checkify, eager IndexError), vmap, jit, derivatives and compile time on a
long axis.

Expected values come from the spec text or from
`gs.np_gather_elements`, a loop over output positions.
"""

from __future__ import annotations

import functools
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxops
from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER_ELEMENTS

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# ---------------------------------------------------------------------------
# Examples of the ONNX GatherElements-11/13 specification. The -13 text is
# right; the -11 text prints each output inside one bracket level too many
# (shape (1, 2, 2) instead of indices' (2, 2)): the runtime and -13 give
# indices' shape (docs/semantics.md#ge-1).

EX1 = ([[1, 2], [3, 4]], [[0, 0], [1, 0]], 1)
EX2 = ([[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[1, 2, 0], [2, 0, 0]], 0)

SPEC_EXAMPLES = {
  "v13_example1": (*EX1, [[1, 1], [4, 3]]),
  "v13_example2": (*EX2, [[4, 8, 3], [7, 2, 3]]),
  # As printed in the -11 text, with the extra bracket level.
  "v11_example1_bracket_erratum": (*EX1, [[[1, 1], [4, 3]]]),
  "v11_example2_bracket_erratum": (*EX2, [[[4, 8, 3], [7, 2, 3]]]),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_spec_example(name, index_dtype):
  data, indices, axis, printed = SPEC_EXAMPLES[name]
  if name.startswith("v11"):
    # Erratum: the output has indices' shape, not the printed one.
    assert np.shape(printed) == (1,) + np.shape(indices)
    printed = printed[0]
  assert np.shape(printed) == np.shape(indices)
  example = (data, indices, axis, printed)
  checks.assert_spec_example(
    GATHER_ELEMENTS, example, np.float32, index_dtype, name
  )


def test_onnx_negative_indices_example():
  # The negative-indices example of the ONNX operator docs.
  data = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32)
  indices = np.array([[-1, -2, 0], [-2, 0, 0]], np.int32)
  assert_same(
    jaxops.gather_elements(data, indices, axis=0),
    np.array([[7, 5, 3], [4, 2, 3]], np.float32),
  )


# ---------------------------------------------------------------------------
# Bad inputs: (data shape, indices shape, axis, exception, regex); each runs
# through the shape rule and through the operator (via eval_shape).

BAD_SHAPES = {
  "data_rank0": (
    (),
    (),
    0,
    ValueError,
    r"data must have rank >= 1, got rank 0 \(data shape \(\), "
    r"indices shape \(\)\)",
  ),
  "rank_mismatch": (
    (2, 3),
    (2, 3, 1),
    0,
    ValueError,
    r"rank\(indices\)=3 must equal rank\(data\)=2 "
    r"\(data shape \(2, 3\), indices shape \(2, 3, 1\)\)",
  ),
  "rank_mismatch_lower": (
    (2, 3),
    (6,),
    0,
    ValueError,
    r"rank\(indices\)=1 must equal rank\(data\)=2",
  ),
  "axis_too_large": (
    (2, 3),
    (2, 3),
    2,
    ValueError,
    r"axis=2 must be in \[-r, r-1\] = \[-2, 1\] for rank "
    r"r=2 \(data shape \(2, 3\), indices shape \(2, 3\)\)",
  ),
  "axis_too_small": (
    (2, 3, 4),
    (2, 3, 4),
    -4,
    ValueError,
    r"axis=-4 must be in \[-r, r-1\] = \[-3, 2\] for rank "
    r"r=3 \(data shape \(2, 3, 4\)",
  ),
  "indices_dim_larger": (
    (2, 3),
    (3, 3),
    1,
    ValueError,
    r"indices.shape\[0\]=3 must be <= data.shape\[0\]=2 in every dim "
    r"other than axis=1 \(data shape \(2, 3\), indices shape \(3, 3\)\)",
  ),
  "indices_dim_larger_negative_axis": (
    (2, 3, 4),
    (2, 3, 5),
    -2,
    ValueError,
    r"indices.shape\[2\]=5 must be <= data.shape\[2\]=4 in every dim "
    r"other than axis=1",
  ),
  "negative_dim": (
    (2, -3),
    (2, 1),
    0,
    ValueError,
    r"data shape \(2, -3\) has a negative dim",
  ),
  "axis_float": (
    (2, 3),
    (2, 3),
    1.0,
    TypeError,
    r"axis must be an int, got float 1.0",
  ),
  "axis_bool": (
    (2, 3),
    (2, 3),
    False,
    TypeError,
    r"axis must be an int, got bool False",
  ),
  "axis_none": (
    (2, 3),
    (2, 3),
    None,
    TypeError,
    r"axis must be an int, got NoneType None",
  ),
}


@pytest.mark.parametrize("name", BAD_SHAPES)
def test_shape_rule_rejects(name):
  checks.assert_shape_rule_rejects(GATHER_ELEMENTS, BAD_SHAPES[name])


@pytest.mark.parametrize("name", checks.array_shapes(BAD_SHAPES))
def test_operator_rejects(name):
  checks.assert_operator_rejects(GATHER_ELEMENTS, BAD_SHAPES[name])


# Other bad values than the other gathers try, for variety.
BAD_CALLS = checks.bad_calls(
  GATHER_ELEMENTS,
  (2, 3),
  float_dtype=jnp.float16,
  mode="drop",
  fill_value=[1.0, 2.0],
)
BAD_CALLS["clip_on_empty_axis"] = (
  lambda: jax.jit(lambda d, i: jaxops.gather_elements(d, i, 1, mode="clip"))(
    np.zeros((2, 0)), np.zeros((2, 1), np.int32)
  ),
  IndexError,
  r"cannot gather along axis=1 of size 0 \(data shape \(2, 0\)\)",
)


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_call(name):
  checks.assert_bad_call(GATHER_ELEMENTS, BAD_CALLS[name])


# ---------------------------------------------------------------------------
# Axes, negative indices, smaller indices dims.


@pytest.mark.parametrize("axis", range(-3, 3))
def test_every_axis_with_negative_indices(axis):
  rng = np.random.default_rng(axis + 3)
  data = gen.random_values(rng, (3, 4, 5), np.float32)
  indices_shape = [3, 4, 5]
  indices_shape[axis] = 6
  indices = gen.random_indices(rng, data.shape[axis], tuple(indices_shape))
  assert (indices < 0).any() and (indices >= 0).any()
  expected = gs.np_gather_elements(data, indices, axis)
  assert_same(jaxops.gather_elements(data, indices, axis), expected)
  # A negative axis is the same as its positive counterpart.
  assert_same(jaxops.gather_elements(data, indices, axis % 3), expected)
  # Negative indices are the same as their positive counterparts.
  positive = np.where(indices < 0, indices + data.shape[axis], indices)
  assert_same(jaxops.gather_elements(data, positive, axis), expected)


def test_smaller_indices_dim_is_not_broadcast():
  data = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.int32)
  # indices dim 1 (size 1) vs data dim 1 (size 3): output dim 1 has size 1
  # and covers data's column 0 only.
  indices = np.array([[2], [0], [1], [2]], np.int32)
  out = jaxops.gather_elements(data, indices, axis=0)
  assert_same(out, np.array([[7], [1], [4], [7]], np.int32))
  # Along axis 1, an indices dim 0 of 1 reads row 0 only.
  out = jaxops.gather_elements(data, np.array([[2, 0, 1, 1, -1]]), axis=1)
  assert_same(out, np.array([[3, 1, 2, 2, 3]], np.int32))


SMALLER_INDICES = {
  # name: (data shape, indices shape, axis)
  "rank3_axis1": ((4, 3, 5), (2, 7, 1), 1),
  "rank3_axis_last": ((3, 4, 5), (2, 4, 6), -1),
  "rank4_axis0": ((2, 3, 4, 5), (3, 1, 4, 2), 0),
  "rank2_all_ones": ((3, 4), (1, 1), 0),
}


@pytest.mark.parametrize("name", SMALLER_INDICES)
def test_smaller_indices_dims(name):
  data_shape, indices_shape, axis = SMALLER_INDICES[name]
  rng = np.random.default_rng(5)
  data = gen.random_values(rng, data_shape, np.float32)
  indices = gen.random_indices(rng, data_shape[axis], indices_shape)
  expected = gs.np_gather_elements(data, indices, axis)
  assert expected.shape == indices_shape
  checks.assert_gathers(GATHER_ELEMENTS, data, indices, (axis,), expected, name)
  checks.assert_grad_counts_reads(GATHER_ELEMENTS, data, indices, (axis,), name)


# ---------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_data_dtypes(dtype):
  rng = np.random.default_rng(6)
  data = gen.random_values(rng, (3, 4), dtype)
  indices = gen.random_indices(rng, 4, (2, 5))
  expected = gs.np_gather_elements(data, indices, 1)
  name = gen.dtype_id(dtype)
  assert_same(jaxops.gather_elements(data, indices, 1), expected, name)
  assert_same(
    jax.jit(jaxops.gather_elements, static_argnums=2)(
      jnp.asarray(data), indices, 1
    ),
    expected,
    name,
  )


@pytest.mark.parametrize("index_dtype", gen.EVERY_INDEX_DTYPE, ids=gen.dtype_id)
def test_index_dtypes(index_dtype):
  # An axis of 300 > int8 max: negative int8 indices must be widened before
  # the wrap, or i + 300 overflows.
  data = np.arange(600, dtype=np.float32).reshape(2, 300)
  info = jnp.iinfo(index_dtype)
  signed = jnp.issubdtype(index_dtype, jnp.signedinteger)
  top = min(300, int(info.max) + 1)
  values = np.array(
    [[0, top - 1, max(-300, int(info.min))], [-1 if signed else 1, 2, 0]]
  )
  indices = values.astype(index_dtype)
  expected = gs.np_gather_elements(data, indices, 1)
  assert_same(jaxops.gather_elements(data, indices, 1), expected)
  assert_same(
    jax.jit(jaxops.gather_elements, static_argnums=2)(
      data, jnp.asarray(indices), 1
    ),
    expected,
  )


# ---------------------------------------------------------------------------
# Zero-size inputs: (data shape, indices shape, axis, output shape).

ZERO_SIZE = {
  "empty_indices_on_axis": ((3, 4), (3, 0), 1, (3, 0)),
  "empty_indices_off_axis": ((3, 4), (0, 4), 1, (0, 4)),
  "empty_data_and_indices": ((0, 4), (0, 2), 1, (0, 2)),
  "empty_axis_no_indices": ((3, 0), (3, 0), 1, (3, 0)),
  "empty_other_dim": ((2, 0, 3), (5, 0, 3), 0, (5, 0, 3)),
}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_size(name):
  checks.assert_zero_size(GATHER_ELEMENTS, ZERO_SIZE[name], name)


def test_zero_size_axis_with_indices():
  """Every index reads an empty axis: eager raises, jit fills."""
  checks.assert_reads_an_empty_dim(GATHER_ELEMENTS, (2, 0), (2, 3), (1,))


# ---------------------------------------------------------------------------
# Out-of-range indices: one out-of-range value among in-range ones along an
# axis of size 3.

OOB_DATA = np.arange(1, 7, dtype=np.float32).reshape(2, 3)

OOB_VALUES = {
  "past_end": (3, np.int32),
  "below_minus_size": (-4, np.int32),
  "int64_2pow32_plus_1": (2**32 + 1, np.int64),
  # After the negative wrap (+3) this is 1 modulo 2**32.
  "int64_wraps_to_1_in_int32": (-(2**32) - 2, np.int64),
  "int64_max": (2**63 - 1, np.int64),
  "int64_min": (-(2**63), np.int64),
  "uint32_max": (2**32 - 1, np.uint32),
  "uint64_2pow32_plus_1": (2**32 + 1, np.uint64),
  "uint64_2pow63_plus_2": (2**63 + 2, np.uint64),
  "int8_min": (-128, np.int8),
  "uint16_max": (2**16 - 1, np.uint16),
}


def _oob_indices(name):
  value, dtype = OOB_VALUES[name]
  return np.array([[2, value], [0, 1]], dtype=dtype)


@pytest.mark.parametrize("name", gs.wide_only_in_x64(OOB_VALUES))
def test_out_of_range_fill_never_reads_data(name):
  indices = _oob_indices(name)
  assert_same(
    GATHER_ELEMENTS.jitted(1)(OOB_DATA, indices),
    np.array([[3, np.nan], [4, 5]], np.float32),
    name,
  )
  assert_same(
    GATHER_ELEMENTS.jitted(1, fill_value=np.float32(-7))(OOB_DATA, indices),
    np.array([[3, -7], [4, 5]], np.float32),
    name,
  )
  with pytest.raises(
    IndexError,
    match=r"^GatherElements-13: indices\[0, 1\]"
    r"=-?\d+ is out of range for a dim of size 3",
  ):
    jaxops.gather_elements(OOB_DATA, indices, 1)


@pytest.mark.parametrize(
  "name",
  gs.wide_only_in_x64(
    OOB_VALUES,
    ["past_end", "int64_2pow32_plus_1", "uint64_2pow63_plus_2", "int64_min"],
  ),
)
def test_out_of_range_clip(name):
  value, _ = OOB_VALUES[name]
  clipped = OOB_DATA[0, 2 if value > 0 else 0]
  assert_same(
    GATHER_ELEMENTS.jitted(1, mode="clip")(OOB_DATA, _oob_indices(name)),
    np.array([[3, clipped], [4, 5]], np.float32),
    name,
  )


@pytest.mark.parametrize(
  "dtype,fill",
  [
    (np.float64, np.nan),
    (np.int8, -128),
    (np.uint32, 2**32 - 1),
    (np.bool_, True),
    (jnp.bfloat16, np.nan),
  ],
)
def test_default_fill_values(dtype, fill):
  fn = GATHER_ELEMENTS.jitted(1)
  out = fn(np.zeros((2, 3), dtype), np.array([[0, 9], [0, 0]]))
  assert_same(out, np.array([[0, fill], [0, 0]], dtype))


def test_eager_index_error_message():
  with pytest.raises(
    IndexError,
    match=re.escape(
      "GatherElements-13: indices[1, 0]=-4 is out of range for a dim of size "
      "3 (valid: [-s, s-1])"
    ),
  ):
    jaxops.gather_elements(OOB_DATA, np.array([[0], [-4]]), axis=1)
  with pytest.raises(
    IndexError,
    match=re.escape("indices[0, 1]=9223372036854775810 is out of range"),
  ):
    jaxops.gather_elements(OOB_DATA, _oob_indices("uint64_2pow63_plus_2"), 1)


@checks.checkify_cases(
  OOB_VALUES,
  ["past_end", "below_minus_size", "int64_2pow32_plus_1", "uint32_max"],
)
def test_checkify_reports_out_of_range(mode, name):
  valid = _oob_indices(name)
  valid[0, 1] = 1
  expected = np.array([[3, 2], [4, 5]], np.float32)
  checks.assert_checkify_reports(
    GATHER_ELEMENTS, mode, (1,), OOB_DATA, _oob_indices(name), valid, expected
  )


# ---------------------------------------------------------------------------
# vmap equals a Python loop.

VMAP_CONFIGS = {
  # name: (data shape, indices shape, axis, in_axes, out_axes)
  "data_only_axis1": ((3, 5, 4), (3, 2), 1, (1, None), 0),
  "indices_only_axis2": ((3, 4), (3, 2, 5), 1, (None, 2), 0),
  "both_axes_0_1_negative_axis": ((5, 3, 4), (3, 5, 6), -1, (0, 1), 1),
  "both_smaller_indices": ((2, 4, 5), (1, 5, 3), 0, (2, 1), -1),
}


@pytest.mark.parametrize("out_of_range", [False, True])
@pytest.mark.parametrize("name", VMAP_CONFIGS)
def test_vmap_equals_loop(name, out_of_range):
  row = VMAP_CONFIGS[name]
  checks.assert_vmap_equals_loop(
    GATHER_ELEMENTS, row, out_of_range, name, seed=7
  )


# ---------------------------------------------------------------------------
# Derivatives.

GRAD_CONFIGS = {
  "axis0_duplicates": ((3, 4), (5, 4), 0),
  "axis_last_smaller": ((3, 4, 2), (2, 3, 5), -1),
  "rank1": ((6,), (9,), 0),
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("name", GRAD_CONFIGS)
def test_check_grads(name):
  checks.check_derivatives(GATHER_ELEMENTS, GRAD_CONFIGS[name], seed=8)


def test_grad_ignores_out_of_range():
  data = np.arange(6, dtype=np.float64).reshape(2, 3)
  indices = np.array([[0, 0, 5], [-1, 2, -9]])
  grad, tangent = checks.grad_and_tangent(GATHER_ELEMENTS, data, indices, (1,))
  assert_same(grad, np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]]))
  assert_same(tangent, np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]))


# ---------------------------------------------------------------------------
# Compile time on a long axis: the program must not grow with the axis
# length (no one-hot / choose formulation).


def _compiled_gather(axis_len):
  data = jax.ShapeDtypeStruct((4, axis_len), jnp.float32)
  indices = jax.ShapeDtypeStruct((4, axis_len), jnp.int32)
  lowered = jax.jit(lambda d, i: jaxops.gather_elements(d, i, 1)).lower(
    data, indices
  )
  return lowered


def test_long_axis_program_size_is_independent_of_length():
  short = _compiled_gather(8).as_text()
  long = _compiled_gather(8192).as_text()
  strip = lambda text: re.sub(r"\d+", "N", text)
  assert strip(short) == strip(long)


def test_axis_8192_compiles_in_about_a_second():
  lowered = _compiled_gather(8192)
  start = time.perf_counter()
  compiled = lowered.compile()
  seconds = time.perf_counter() - start
  # About 0.05 s on an idle core; the bound leaves room for a loaded CI box.
  assert seconds < 3.0, f"compiling an 8192-long GatherElements took {seconds}"
  rng = np.random.default_rng(9)
  data = rng.standard_normal((4, 8192)).astype(np.float32)
  indices = rng.integers(-8192, 8192, size=(4, 8192)).astype(np.int32)
  assert_same(
    compiled(data, indices), np.take_along_axis(data, indices % 8192, axis=1)
  )


# ---------------------------------------------------------------------------
# Property test: random valid cases against NumPy.


@checks.random_cases(
  20,
  [np.float32, np.int16, np.bool_, np.complex128],
  [np.int32, np.int64, np.uint16],
)
def test_property_matches_numpy(seed, dtype, index_dtype):
  case = gs.random_gather_elements_case(
    seed,
    dtypes=(dtype,),
    index_dtypes=(index_dtype,),
    negative=np.issubdtype(index_dtype, np.signedinteger),
  )
  checks.assert_case_matches(GATHER_ELEMENTS, case)


# NumPy arrays have at most 64 dims; JAX's more, and so do the operators'
# inputs (the index work never makes a NumPy array of an input's rank).
@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("mode", ["fill", "clip"])
@pytest.mark.parametrize("rank", [64, 65])
def test_rank_64_and_65(rank, mode):
  data = jnp.arange(2, dtype=jnp.float32).reshape((2,) + (1,) * (rank - 1))
  indices = jnp.ones((1,) * rank, jnp.int32)
  eager = functools.partial(jaxops.gather_elements, mode=mode)
  for call in (eager, jax.jit(eager)):
    out = call(data, indices)
    assert out.shape == indices.shape
    assert_same(out.reshape(-1), np.array([1], np.float32))
  grad = jax.grad(lambda d: jaxops.gather_elements(d, indices).sum())(data)
  assert_same(grad.reshape(-1), np.array([0, 1], np.float32))
