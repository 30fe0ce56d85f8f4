"""Unit tests for ScatterNDUpdate-3 (`jaxops.scatter_nd_update`).

Data movement is checked with exact equality against a NumPy loop that applies
the update tuples in order (so duplicates resolve last-wins), derivatives with
`check_grads` and exact zero patterns.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jax.test_util import check_grads

import jaxops
from jaxops import _duplicates as dup
from jaxops import shapes
from tests.support import generators as gen
from tests.support import rejections, scatter
from tests.support.asserts import assert_same
from tests.support.scatter import np_scatter_nd_update, random_case

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# --- spec examples


def test_spec_example_1_elements():
  data = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int32)
  indices = np.array([[4], [3], [1], [7]], np.int32)
  updates = np.array([9, 10, 11, 12], np.int32)
  out = jaxops.scatter_nd_update(data, indices, updates)
  assert_same(out, np.array([1, 11, 3, 10, 9, 6, 7, 12], np.int32))


def test_spec_example_2_slices():
  a = [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]]
  b = [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]]
  data = np.array([a, a, b, b], np.int32)
  indices = np.array([[0], [2]], np.int64)
  updates = np.array(
    [
      [[5] * 4, [6] * 4, [7] * 4, [8] * 4],
      [[1] * 4, [2] * 4, [3] * 4, [4] * 4],
    ],
    np.int32,
  )
  expected = np.array([updates[0], a, updates[1], b], np.int32)
  assert_same(jaxops.scatter_nd_update(data, indices, updates), expected)


def test_ir_layer_example_shape_rule_and_eval_shape():
  data_shape, indices_shape, updates_shape = (
    (1000, 256, 10, 15),
    (25, 125, 3),
    (25, 125, 15),
  )
  assert (
    shapes.scatter_nd_update(data_shape, indices_shape, updates_shape)
    == data_shape
  )
  out = jax.eval_shape(
    jaxops.scatter_nd_update,
    jax.ShapeDtypeStruct(data_shape, jnp.float32),
    jax.ShapeDtypeStruct(indices_shape, jnp.int32),
    jax.ShapeDtypeStruct(updates_shape, jnp.float32),
  )
  assert out.shape == data_shape and out.dtype == jnp.float32


# --- bad inputs

OP = "ScatterNDUpdate-3"
F32, I32 = np.float32, np.int32

# name: (data, indices and updates as abstract values (`scatter.arrays`),
#  kwargs, exception, message regex)
BAD_INPUTS = {
  "updates_would_broadcast": (
    "f32[4,3] i32[2,1] f32[1,3]",
    {},
    ValueError,
    r"^updates shape \(1, 3\) must equal "
    r"indices.shape\[:-1\] \+ data.shape\[k:\] = \(2, 3\) with k=1; updates "
    r"are not broadcast",
  ),
  "updates_scalar_for_vector": (
    "f32[4,3] i32[2,2] f32[]",
    {},
    ValueError,
    r"updates shape \(\) must equal .* = \(2,\) with k=2",
  ),
  "updates_wrong_slice": (
    "f32[4,3] i32[2,1] f32[2,4]",
    {},
    ValueError,
    r"updates shape \(2, 4\) must equal .* = \(2, 3\)",
  ),
  "updates_two_elements_for_0d": (
    "f32[4] i32[1] f32[2]",
    {},
    ValueError,
    r"updates shape \(2,\) must equal .* = \(\) \(or \(1,\)\)",
  ),
  "k_greater_than_rank": (
    "f32[4] i32[2,2] f32[2]",
    {},
    ValueError,
    r"indices.shape\[-1\]=2 must be <= rank\(data\)=1 "
    r"\(data shape \(4,\), indices shape \(2, 2\), updates shape \(2,\)\)",
  ),
  "data_rank_0": (
    "f32[] i32[1] f32[]",
    {},
    ValueError,
    r"data must have rank >= 1, got rank 0",
  ),
  "indices_rank_0": (
    "f32[4] i32[] f32[]",
    {},
    ValueError,
    r"indices must have rank >= 1, got rank 0",
  ),
  "float_indices": (
    "f32[4] f32[2,1] f32[2]",
    {},
    TypeError,
    r"^indices must have an integer dtype, "
    r"got float32",
  ),
  "dtype_mismatch": (
    "f32[4] i32[2,1] f16[2]",
    {},
    TypeError,
    r"updates dtype float16 must equal data dtype float32",
  ),
  "int_updates_for_float_data": (
    "f32[4] i32[2,1] i32[2]",
    {},
    TypeError,
    r"updates dtype int32 must equal data dtype float32",
  ),
  "bad_mode": (
    "f32[4] i32[2,1] f32[2]",
    {"mode": "wrap"},
    ValueError,
    r"mode='wrap' must be one of \('drop', 'clip', "
    r"'promise_in_bounds'\)",
  ),
  "unique_not_bool": (
    "f32[4] i32[2,1] f32[2]",
    {"unique_indices": 1},
    TypeError,
    r"unique_indices must be a Python bool, got int 1",
  ),
  "explicit_reduction_none": (
    "f32[4] i32[2,1] f32[2]",
    {"reduction": "none", "mode": "wrap"},
    ValueError,
    r"^mode='wrap' must be one of",
  ),
  "unknown_reduction": (
    "f32[4] i32[2,1] f32[2]",
    {"reduction": "mean"},
    ValueError,
    r"^reduction='mean' must be one of \('none', 'sum', 'sub', 'prod', "
    r"'min', 'max'\)",
  ),
  "reduction_not_a_string": (
    "f32[4] i32[2,1] f32[2]",
    {"reduction": None},
    ValueError,
    r"^reduction=None must be one of",
  ),
  "min_of_complex": (
    "c64[4] i32[2,1] c64[2]",
    {"reduction": "min"},
    TypeError,
    r"^reduction='min' is not defined for complex data",
  ),
}

OP_15 = "ScatterNDUpdate-15"


def op_of(reduction):
  """The operator a call names in its errors: ScatterNDUpdate-15 for a
  reduction other than "none" (docs/semantics.md#scatter-reductions)."""
  return OP if reduction in ("default", "none") else OP_15


# Every row as the call gives it (reduction not passed: "default") and with
# reduction "sum", which names ScatterNDUpdate-15; a row with its own
# reduction once.
@pytest.mark.parametrize(
  "name, reduction",
  [
    (name, reduction)
    for name, row in BAD_INPUTS.items()
    for reduction in (
      (row[1]["reduction"],) if "reduction" in row[1] else ("default", "sum")
    )
  ],
)
def test_bad_inputs_raise_at_trace_time(name, reduction):
  avals, kwargs, exc, pattern = BAD_INPUTS[name]
  attrs = dict(kwargs)
  if reduction != "default":
    attrs["reduction"] = reduction
  rejections.assert_rejected(
    op_of(reduction),
    exc,
    pattern,
    operator=jaxops.scatter_nd_update,
    # The shape rule sees shapes only, and names ScatterNDUpdate-3.
    shape_rule=shapes.scatter_nd_update
    if exc is ValueError and not attrs
    else None,
    arrays=scatter.arrays(avals),
    attrs=attrs,
  )


# Bad input a demanding new user tries, eagerly and under jit
# (`scatter.bad_calls`), and a Python int updates scalar data's dtype does not
# hold. (data, indices, updates, expectation: `(exception, message regex)` or
# one per x64 mode, `rejections.in_mode`).
BAD_CALLS = {
  **scatter.bad_calls(
    [[0]],
    (np.zeros(3, F32), rejections.RAGGED_LIST, np.ones(2, F32)),
    (np.zeros((3, 2), F32), [[0], [1]], [[1.0, 2.0], [3.0]]),
    lambda indices: (np.zeros(2, F32), indices, np.ones(len(indices), F32)),
  ),
  "python_int_2**40_scalar_into_int32": (
    np.zeros(3, np.int32),
    [0],
    2**40,
    (
      ValueError,
      r"^updates value 1099511627776 does not fit data dtype int32",
    ),
  ),
}


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("mode", ["drop", "clip"])
@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_call(name, mode, reduction, jax_mode):
  rejections.assert_scatter_rejected(
    op_of(reduction),
    BAD_CALLS[name],
    jax_mode,
    jaxops.scatter_nd_update,
    mode=mode,
    reduction=reduction,
  )


# Index values beyond int32 from the host, which x32 mode narrows: clip mode
# clamps them into range as x64 mode does, never wraps them (2**32 + 1 must
# not write at 1). (indices, dtype, the position written).
CLIP_BEYOND_INT32 = {
  "2**32+1": (2**32 + 1, np.int64, 2),
  "2**31": (2**31, np.int64, 2),
  "-2**31-1": (-(2**31) - 1, np.int64, 0),
  "-2**63": (-(2**63), np.int64, 0),
  "uint64_2**32+1": (2**32 + 1, np.uint64, 2),
  "uint64_2**63": (2**63, np.uint64, 2),
  "python_2**63": (2**63, None, 2),
}


@pytest.mark.parametrize("name", CLIP_BEYOND_INT32)
def test_clip_clamps_host_indices_beyond_int32(name):
  value, dtype, written = CLIP_BEYOND_INT32[name]
  indices = [[1, value]] if dtype is None else np.array([[1, value]], dtype)
  expected = np.zeros((2, 3), np.float32)
  expected[1, written] = 7

  def call():
    return jaxops.scatter_nd_update(
      np.zeros((2, 3), np.float32), indices, [7.0], mode="clip"
    )

  assert_same(call(), expected, name)
  assert_same(jax.jit(call)(), expected, name)


def test_python_float_list_into_int_data_is_rejected():
  with pytest.raises(
    TypeError,
    match=r"updates given as a Python float "
    r"cannot be converted to data dtype int32",
  ):
    jaxops.scatter_nd_update(np.zeros(3, np.int32), [[0]], [1.5])


def test_python_values_take_data_dtype():
  out = jaxops.scatter_nd_update(np.zeros(3, np.float32), [[2], [0]], [7, 8])
  assert_same(out, np.array([8, 0, 7], np.float32))


# Data of every numeric dtype takes Python numbers: those whose NumPy kind is
# "V" (bfloat16, most 8-bit floats, int2/4) were refused as another dtype.
@pytest.mark.parametrize(
  "dtype", [d for d in gen.DATA_DTYPES if d != np.bool_], ids=gen.dtype_id
)
def test_python_numbers_take_every_data_dtype(dtype):
  data = np.zeros(3, np.int8).astype(dtype)  # NaN in float8_e8m0fnu
  expected = np.array([1, 0, 1]).astype(dtype)
  assert_same(jaxops.scatter_nd_update(data, [[2], [0]], [1, 1]), expected)
  assert_same(jaxops.scatter_elements_update(data, [2, 0], [1, 1]), expected)
  # Under jit a Python number passed in is a weakly typed scalar.
  one = jax.jit(lambda d, v: jaxops.scatter_nd_update(d, [2], v))(data, 1)
  assert_same(one, np.array([0, 0, 1]).astype(dtype))
  if jnp.issubdtype(dtype, jnp.inexact):
    half = np.array([0, 0, 0.5]).astype(dtype)  # 0 as the dtype holds it
    assert_same(jaxops.scatter_nd_update(data, [[2]], [0.5]), half)


def test_eager_out_of_range_raises_index_error():
  with pytest.raises(
    IndexError,
    match=re.escape(
      "ScatterNDUpdate-3: indices[1, 0]=4 is out of range for a dim of size 4"
    ),
  ):
    jaxops.scatter_nd_update(np.zeros(4), np.array([[1], [4]]), np.ones(2))
  with pytest.raises(IndexError, match=r"indices\[0, 1\]=-4 is out of range"):
    jaxops.scatter_nd_update(np.zeros((2, 3)), np.array([[1, -4]]), np.ones(1))


# --- values: shapes, dtypes, zero-size

# Jitted once: one compilation per signature instead of one per primitive
# (eager equality with jit is part of tests/test_transforms.py).
_JITTED = jax.jit(jaxops.scatter_nd_update)
_JITTED_UNIQUE = jax.jit(
  functools.partial(jaxops.scatter_nd_update, unique_indices=True)
)

SHAPE_CASES = [
  # (data shape, leading indices shape, k)
  ((8,), (4,), 1),
  ((5, 6), (3,), 2),
  ((5, 6), (2, 2), 1),
  ((4, 3, 5), (2, 2), 2),
  ((4, 3, 5), (), 3),
  ((4, 3, 5), (1,), 1),
  ((6, 2, 3, 2), (2, 1, 2), 3),
]


@pytest.mark.parametrize("unique", [True, False], ids=["unique", "duplicates"])
@pytest.mark.parametrize(
  "data_shape,lead,k", SHAPE_CASES, ids=[str(c) for c in SHAPE_CASES]
)
@pytest.mark.covering_modes
def test_matches_in_order_reference(data_shape, lead, k, unique):
  rng = np.random.default_rng(hash((data_shape, lead, k)) % 2**32)
  for _ in range(3):
    data, indices, updates = random_case(
      rng, data_shape, lead, k, unique=unique
    )
    out = _JITTED(data, indices, updates)
    assert_same(out, np_scatter_nd_update(data, indices, updates))
    if unique:
      assert_same(_JITTED_UNIQUE(data, indices, updates), np.asarray(out))


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_every_data_dtype(dtype):
  rng = np.random.default_rng(3)
  data = rng.integers(0, 100, size=(5, 4)).astype(dtype)
  updates = rng.integers(0, 100, size=(3, 4)).astype(dtype)
  indices = np.array([[4], [-5], [4]], np.int32)  # duplicate: last wins
  assert_same(
    _JITTED(data, indices, updates),
    np_scatter_nd_update(data, indices, updates),
  )


@pytest.mark.parametrize("index_dtype", gen.EVERY_INDEX_DTYPE, ids=gen.dtype_id)
def test_index_dtypes(index_dtype):
  rng = np.random.default_rng(4)
  info = jnp.iinfo(index_dtype)
  data = rng.standard_normal((200, 3))
  indices = rng.integers(max(-200, int(info.min)), 200, size=(50, 1))
  indices = np.minimum(indices, min(int(info.max), 199)).astype(index_dtype)
  updates = rng.standard_normal((50, 3))
  expected = np_scatter_nd_update(data, indices, updates)
  assert_same(_JITTED(data, indices, updates), expected)


@pytest.mark.jax_modes("x64")  # x32 narrows uint64 at the jit boundary
def test_unsigned_out_of_range_under_jit_is_dropped_not_wrapped():
  # 2**32 + 1 would alias index 1 if narrowed to 32 bits without care.
  data = np.zeros(4)
  indices = np.array([[2**32 + 1], [3], [2**63]], np.uint64)
  out = jax.jit(jaxops.scatter_nd_update)(
    data, indices, np.array([5.0, 6.0, 7.0])
  )
  assert_same(out, np.array([0, 0, 0, 6.0]))


@pytest.mark.parametrize("updates_shape", [(), (1,)], ids=["0d", "one_element"])
def test_zero_d_updates_and_one_element_form(updates_shape):
  data = np.arange(6, dtype=np.float32).reshape(2, 3)
  updates = np.full(updates_shape, 9, np.float32)
  out = jaxops.scatter_nd_update(data, np.array([1, -1]), updates)
  assert_same(out, np.array([[0, 1, 2], [3, 4, 9]], np.float32))
  grad = jax.grad(
    lambda u: jnp.sum(jaxops.scatter_nd_update(data, np.array([1, 2]), u) * 3)
  )(updates)
  assert_same(grad, np.full(updates_shape, 3, np.float32))


ZERO_SIZE = {
  # name: (data shape, indices shape, updates shape)
  "no_tuples": ((4, 3), (0, 1), (0, 3)),
  "no_tuples_2d_lead": ((4, 3), (2, 0, 2), (2, 0)),
  "empty_slices": ((4, 0), (2, 1), (2, 0)),
  "empty_data_and_tuples": ((0, 3), (0, 1), (0, 3)),
}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_size(name):
  data_shape, indices_shape, updates_shape = ZERO_SIZE[name]
  data = np.ones(data_shape, np.float32)
  indices = np.zeros(indices_shape, np.int32)
  updates = np.zeros(updates_shape, np.float32)
  for fn in (jaxops.scatter_nd_update, jax.jit(jaxops.scatter_nd_update)):
    out = fn(data, indices, updates)
    assert_same(out, data)
  grads = jax.grad(
    lambda d, u: jnp.sum(jaxops.scatter_nd_update(d, indices, u)),
    argnums=(0, 1),
  )(data, updates)
  assert_same(grads[0], np.ones(data_shape, np.float32))
  assert_same(grads[1], np.zeros(updates_shape, np.float32))


def test_tuples_into_an_empty_dim_are_dropped_under_jit():
  data = np.zeros((0, 3), np.float32)
  out = jax.jit(jaxops.scatter_nd_update)(
    data, np.array([[0]]), np.ones((1, 3), np.float32)
  )
  assert out.shape == (0, 3)
  with pytest.raises(IndexError, match="dim of size 0"):
    jaxops.scatter_nd_update(data, np.array([[0]]), np.ones((1, 3), np.float32))


def test_k0_replaces_everything_and_last_wins():
  data = np.zeros((2, 3))
  updates = np.stack([np.full((2, 3), 1.0), np.full((2, 3), 2.0)])
  out = jaxops.scatter_nd_update(data, np.zeros((2, 0), np.int64), updates)
  assert_same(out, np.full((2, 3), 2.0))
  grad_d, grad_u = jax.grad(
    lambda d, u: jnp.sum(jaxops.scatter_nd_update(d, np.zeros((2, 0), int), u)),
    argnums=(0, 1),
  )(data, updates)
  assert_same(grad_d, np.zeros((2, 3)))
  assert_same(grad_u, np.stack([np.zeros((2, 3)), np.ones((2, 3))]))


# --- duplicates: every winner strategy

I32 = np.dtype(np.int32)
STRATEGIES = {
  # Every search, with each repeat test a sort-based search can run. The
  # test shapes are small, so int32 targets and packed keys fit in both
  # x64 modes.
  "table": dup.Strategy(dup.Search.TABLE, dup.RepeatTest.NONE, I32),
  "table_bitmap": dup.Strategy(dup.Search.TABLE, dup.RepeatTest.BITMAP, I32),
  "packed_sort": dup.Strategy(
    dup.Search.PACKED_SORT, dup.RepeatTest.NONE, I32, I32
  ),
  "packed_sort_bitmap": dup.Strategy(
    dup.Search.PACKED_SORT, dup.RepeatTest.BITMAP, I32, I32
  ),
  "packed_sort_sorted": dup.Strategy(
    dup.Search.PACKED_SORT, dup.RepeatTest.SORT, I32, I32
  ),
  "rank_table": dup.Strategy(dup.Search.RANK_TABLE, dup.RepeatTest.NONE, I32),
  "rank_table_bitmap": dup.Strategy(
    dup.Search.RANK_TABLE, dup.RepeatTest.BITMAP, I32
  ),
  "rank_table_sorted": dup.Strategy(
    dup.Search.RANK_TABLE, dup.RepeatTest.SORT, I32
  ),
  "column_sort": dup.Strategy(dup.Search.COLUMNS),
}
# Every search behind a repeat test (and the sort searches without one).
REPEAT_TESTED = [
  name
  for name, s in STRATEGIES.items()
  if s.search in (dup.Search.PACKED_SORT, dup.Search.RANK_TABLE)
  or s.repeat_test is not dup.RepeatTest.NONE
]


def _resolve(strategy):
  """A strategy given by its name in STRATEGIES, or as itself."""
  return STRATEGIES[strategy] if isinstance(strategy, str) else strategy


def _update(strategy, **kwargs):
  """A fresh jitted scatter_nd_update with the strategy forced (a fresh
  function, so that jit does not reuse another strategy's trace)."""
  return jax.jit(
    lambda d, i, u: jaxops.scatter_nd_update(
      d, i, u, _strategy=_resolve(strategy), **kwargs
    )
  )


# (n, sizes) -> the strategy picked without x64 / with x64.
CHOICES = [
  ((4, (7,)), dup.Strategy(dup.Search.TABLE, dup.RepeatTest.NONE, I32), None),
  (
    (64, (64, 64)),
    dup.Strategy(dup.Search.TABLE, dup.RepeatTest.NONE, I32),
    None,
  ),
  # Beyond 2**12 slots the table is behind the bitmap test.
  (
    (8192, (256, 256)),
    dup.Strategy(dup.Search.TABLE, dup.RepeatTest.BITMAP, I32),
    None,
  ),
  (
    (16_384, (41, 4096)),
    dup.Strategy(dup.Search.TABLE, dup.RepeatTest.BITMAP, I32),
    None,
  ),
  (
    (1000, (1 << 20,)),
    dup.Strategy(dup.Search.PACKED_SORT, dup.RepeatTest.BITMAP, I32, I32),
    None,
  ),
  (
    (10_000, (1 << 21,)),
    dup.Strategy(dup.Search.RANK_TABLE, dup.RepeatTest.BITMAP, I32),
    dup.Strategy(
      dup.Search.PACKED_SORT, dup.RepeatTest.BITMAP, I32, np.dtype(np.int64)
    ),
  ),
  (
    (1000, (1 << 24,)),
    dup.Strategy(dup.Search.RANK_TABLE, dup.RepeatTest.SORT, I32),
    dup.Strategy(
      dup.Search.PACKED_SORT, dup.RepeatTest.SORT, I32, np.dtype(np.int64)
    ),
  ),
  # A bitmap of 2**19 words, 20 per tuple: in cache, so still the bitmap.
  (
    (26_214, (1 << 24,)),
    dup.Strategy(dup.Search.RANK_TABLE, dup.RepeatTest.BITMAP, I32),
    dup.Strategy(
      dup.Search.PACKED_SORT, dup.RepeatTest.BITMAP, I32, np.dtype(np.int64)
    ),
  ),
  (
    (1000, (1 << 16, 1 << 16)),
    dup.Strategy(dup.Search.COLUMNS),
    dup.Strategy(
      dup.Search.PACKED_SORT,
      dup.RepeatTest.SORT,
      np.dtype(np.int64),
      np.dtype(np.int64),
    ),
  ),
]


@pytest.mark.parametrize(
  "args,x32,x64", CHOICES, ids=[str(c[0]) for c in CHOICES]
)
def test_choose_strategy(jax_mode, args, x32, x64):
  expected = x64 if jax_mode == "x64" and x64 is not None else x32
  assert dup.choose_strategy(*args) == expected


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
  "data_shape,lead,k",
  [((7,), (40,), 1), ((4, 3, 2), (6, 5), 2), ((3, 4, 2), (30,), 3)],
)
@pytest.mark.covering_modes
def test_duplicates_last_wins_every_strategy(strategy, data_shape, lead, k):
  rng = np.random.default_rng(11)
  data, indices, updates = random_case(
    rng, data_shape, lead, k, unique=False, dtype=np.float32
  )
  # Out-of-range tuples mixed in (dropped under jit), on both sides.
  indices.reshape(-1, k)[::7, 0] = data_shape[0] + 2
  indices.reshape(-1, k)[3::11, 0] = -data_shape[0] - 1
  _check_against_loop(strategy, data, indices, updates, rng)


@functools.cache
def _checked_forms(strategy):
  """The jitted drop and clip forms and d/d updates of one strategy, built
  once so that cases of equal shapes reuse their compilations."""
  update = functools.partial(jaxops.scatter_nd_update, _strategy=strategy)
  grad_u = jax.grad(lambda u, d, i, c: jnp.sum(update(d, i, u) * c))
  clip = functools.partial(update, mode="clip")
  return jax.jit(update), jax.jit(clip), jax.jit(grad_u)


def _check_against_loop(strategy, data, indices, updates, rng, context=""):
  """Values (drop and clip) and d/d updates against the in-order NumPy loop."""
  drop, clip, grad_u = _checked_forms(_resolve(strategy))
  assert_same(
    drop(data, indices, updates),
    np_scatter_nd_update(data, indices, updates),
    context,
  )
  assert_same(
    clip(data, indices, updates),
    np_scatter_nd_update(data, indices, updates, "clip"),
    context,
  )
  # XLA on CPU happens to apply even a "unique" scatter in order, so values
  # alone cannot tell a broken winner search; the losers' zero gradients can.
  cotangent = rng.standard_normal(data.shape).astype(data.dtype)
  assert_same(
    grad_u(updates, data, indices, cotangent),
    _expected_updates_grad(indices, cotangent),
    context,
  )


def _repeat_case(rng, kind, data_shape=(5, 4, 3), n=12, k=2):
  """Indices (n, k) for each branch of the repeat test.

  "unique": no repeats (the search is skipped). "duplicates": in-range repeats
  (it runs). "out_of_range_duplicates": unique in range, repeats only among
  out-of-range tuples (skipped under "drop"; under "clip" they clamp onto
  repeats). "all_out_of_range": every tuple dropped.
  """
  sizes = np.asarray(data_shape[:k])
  data, indices, updates = random_case(
    rng, data_shape, (n,), k, unique=kind != "duplicates", dtype=np.float32
  )
  if kind == "duplicates":
    indices[1::4] = indices[0]  # at least these repeat
  elif kind == "out_of_range_duplicates":
    indices[2::5] = [sizes[0] + 1] + [0] * (k - 1)
    indices[3::5] = -sizes - 1
  elif kind == "all_out_of_range":
    indices[:] = sizes + rng.integers(0, 3, size=(n, k))
    indices[::3] = -sizes - 1
  return data, indices, updates


REPEAT_KINDS = [
  "unique",
  "duplicates",
  "out_of_range_duplicates",
  "all_out_of_range",
]


@pytest.mark.exhaustive(default=4)
@pytest.mark.parametrize("kind", REPEAT_KINDS)
@pytest.mark.parametrize("strategy", REPEAT_TESTED)
@pytest.mark.covering_modes
def test_searches_both_branches_of_the_repeat_test(strategy, kind):
  rng = np.random.default_rng(REPEAT_KINDS.index(kind))
  data, indices, updates = _repeat_case(rng, kind)
  # The repeat test itself: a wrong "no repeats" shows in the loser gradients
  # below, a wrong "repeats" only here.
  test = STRATEGIES[strategy].repeat_test
  if test is not dup.RepeatTest.NONE:
    assert bool(_repeats(test, indices, data.shape)) == (kind == "duplicates")
  _check_against_loop(strategy, data, indices, updates, rng)


def _repeats(test, indices, data_shape):
  """The repeat test `test` on the (n, k) indices (negatives wrapped,
  out-of-range tuples masked)."""
  k = indices.shape[-1]
  sizes = np.asarray(data_shape[:k])
  slots = int(np.prod(sizes))
  wrapped = np.where(indices < 0, indices + sizes, indices)
  in_bounds = np.all((wrapped >= 0) & (wrapped < sizes), axis=1)
  target = np.where(
    in_bounds,
    np.ravel_multi_index(
      tuple(np.where(in_bounds[:, None], wrapped, 0).T), sizes
    ),
    slots,
  )
  if test is dup.RepeatTest.BITMAP:
    distinct = np.where(in_bounds, target, slots + np.arange(len(target)))
    return dup.repeats_in_bitmap(
      jnp.asarray(distinct, jnp.int32), slots + len(target)
    )
  return dup.repeats_in_sorted(jnp.sort(jnp.asarray(target, jnp.int32)), slots)


# name: (targets, in_bounds (None: all), slots, repeats)
BITMAP_CASES = {
  "distinct_bits_of_one_word": ([0, 1, 2, 31], None, 64, False),
  "bit_31_twice_wraps": ([31, 31, 5], None, 64, True),
  "bit_0_three_times": ([32, 32, 32], None, 64, True),
  "carry_into_a_set_bit": ([0, 0, 1], None, 64, True),
  "repeats_only_masked_out": (
    [3, 3, 60, 60, 7],
    [False, True, True, False, True],
    64,
    False,
  ),
  "every_slot_once": (list(range(70)), None, 70, False),
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", BITMAP_CASES)
@pytest.mark.covering_modes
def test_repeats_in_bitmap(name):
  targets, in_bounds, slots, repeats = BITMAP_CASES[name]
  in_bounds = np.ones(len(targets), bool) if in_bounds is None else in_bounds
  n = len(targets)
  # The bitmap test sees masked-out tuples at distinct slots past the end,
  # the sorted test at the sentinel `slots`.
  distinct = np.where(in_bounds, targets, slots + np.arange(n))
  assert (
    bool(dup.repeats_in_bitmap(jnp.asarray(distinct, jnp.int32), slots + n))
    == repeats
  )
  sentinel = np.where(in_bounds, targets, slots).astype(np.int32)
  assert (
    bool(dup.repeats_in_sorted(jnp.sort(jnp.asarray(sentinel)), slots))
    == repeats
  )


@pytest.mark.parametrize("slots", [5, 37, 200])
def test_repeat_tests_match_numpy_on_random_targets(slots):
  positions = jnp.arange(24, dtype=jnp.int32)
  both = jax.jit(
    lambda targets, in_bounds: (
      dup.repeats_in_bitmap(
        jnp.where(in_bounds, targets, slots + positions), slots + 24
      ),
      dup.repeats_in_sorted(jnp.sort(targets), slots),
    )
  )
  rng = np.random.default_rng(slots)
  for _ in range(30):
    in_bounds = rng.random(24) < rng.random()
    targets = np.where(in_bounds, rng.integers(0, slots, 24), slots)
    valid = targets[in_bounds]
    repeats = len(np.unique(valid)) < len(valid)
    got = both(jnp.asarray(targets, jnp.int32), jnp.asarray(in_bounds))
    assert [bool(g) for g in got] == [repeats, repeats], (targets, in_bounds)


def _check_batch(strategy, kinds, cases, rng, conds):
  """`jax.vmap` of the scatter with `strategy` over `cases` (the arrays of
  `kinds`, stacked): each member's output against the loop and its updates'
  gradient (a cotangent drawn from `rng`) against `_expected_updates_grad`;
  with a repeat test, at least `conds` conds in the batched jaxpr."""
  data, indices, updates = (np.stack(arrays) for arrays in zip(*cases))
  update = lambda d, i, u: jaxops.scatter_nd_update(d, i, u, _strategy=strategy)
  out = jax.jit(jax.vmap(update))(data, indices, updates)
  cotangent = rng.standard_normal(data.shape).astype(np.float32)
  grad_u = jax.jit(
    jax.vmap(
      jax.grad(lambda d, i, u, c: jnp.sum(update(d, i, u) * c), argnums=2)
    )
  )(data, indices, updates, cotangent)
  for j, kind in enumerate(kinds):
    assert_same(
      out[j], np_scatter_nd_update(data[j], indices[j], updates[j]), kind
    )
    assert_same(
      grad_u[j], _expected_updates_grad(indices[j], cotangent[j]), kind
    )
  if strategy.repeat_test is not dup.RepeatTest.NONE:
    jaxpr = str(jax.make_jaxpr(jax.vmap(update))(data, indices, updates))
    assert jaxpr.count("cond[") >= conds, jaxpr


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("strategy", REPEAT_TESTED)
@pytest.mark.covering_modes
def test_searches_under_vmap_mixed_batch(strategy):
  """One repeat test for the whole batch: the search stays behind a cond."""
  rng = np.random.default_rng(13)
  cases = [_repeat_case(rng, kind) for kind in REPEAT_KINDS]
  # A batched predicate would have turned each cond into a select running
  # both branches.
  _check_batch(STRATEGIES[strategy], REPEAT_KINDS, cases, rng, conds=1)


def test_small_default_call_runs_inline():
  """64 new rows of a KV cache: the default's index work stays under the
  1,000 flops below which XLA:CPU's PJRT client runs a program on the
  calling thread; above, a worker-thread hand-off costs more than the whole
  call (docs/design.md#inline-threshold)."""
  data = jnp.zeros((4096, 8, 128), jnp.float32)
  indices = jnp.arange(1000, 1064, dtype=jnp.int32)[:, None]
  updates = jnp.ones((64, 8, 128), jnp.float32)
  compiled = (
    jax.jit(jaxops.scatter_nd_update, donate_argnums=0)
    .lower(data, indices, updates)
    .compile()
  )
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  assert cost["flops"] < 1000, cost


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("strategy", REPEAT_TESTED)
@pytest.mark.covering_modes
def test_order_tests_compile_to_one_loop(strategy):
  """The sorted-unique test and the repeat tests are each one variadic
  reduce, which XLA:CPU leaves whole: a plain reduce of more than 32
  elements becomes a chain of reduce-window kernels, each compiled and run
  on its own (docs/design.md#one-pass-reductions)."""
  rng = np.random.default_rng(15)
  data = jnp.zeros((64, 8), jnp.float32)
  indices = jnp.asarray(rng.integers(0, 64, (200, 1)), jnp.int32)
  updates = jnp.ones((200, 8), jnp.float32)
  update = lambda d, i, u: jaxops.scatter_nd_update(
    d, i, u, _strategy=STRATEGIES[strategy]
  )
  grad = jax.grad(lambda d, i, u: jnp.sum(update(d, i, u) ** 2), (0, 2))
  for fn in (update, grad):  # traced indices: nothing folds at compile time
    hlo = jax.jit(fn).lower(data, indices, updates).compile().as_text()
    assert "reduce-window(" not in hlo, hlo


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("strategy", ["table", "packed_sort", "rank_table"])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.covering_modes
def test_vmap_writes_rows_with_one_linear_index(strategy, k):
  """Under vmap the final write flattens the batch into the row index
  (`jaxops._rows`): a tuple out of its member's range -- one past the end
  would be the next member's first row -- stays dropped, and values,
  gradients and tangents equal the members' own (docs/design.md
  #batched-write)."""
  rng = np.random.default_rng(16)
  batch, sizes = 3, (4, 2)[:k]
  data = rng.standard_normal((batch,) + sizes + (3,)).astype(np.float32)
  past_end = np.array(sizes) * np.array([1, 0][:k])  # row `slots` of member
  indices = rng.integers(-4, 4, (batch, 7, k)) % np.array(sizes)
  indices[:, 0] = past_end
  indices[:, 3] = indices[:, 5]  # a repeat: the later one wins
  indices[-1, 6] = past_end + np.array([3, 0][:k])
  indices = indices.astype(np.int32)
  updates = rng.standard_normal((batch, 7, 3)).astype(np.float32)
  cotangent = rng.standard_normal(data.shape).astype(np.float32)

  def update(d, i, u):
    return jaxops.scatter_nd_update(d, i, u, _strategy=STRATEGIES[strategy])

  def loss(d, i, u, c):
    return jnp.sum(update(d, i, u) * c)

  def tangent(d, i, u, d_dot, u_dot):
    return jax.jvp(lambda d, u: update(d, i, u), (d, u), (d_dot, u_dot))[1]

  args = (data, indices, updates)
  out = jax.jit(jax.vmap(update))(*args)
  grads = jax.jit(jax.vmap(jax.grad(loss, (0, 2))))(*args, cotangent)
  tangents = jax.jit(jax.vmap(tangent))(*args, cotangent, updates)
  single_grad = jax.jit(jax.grad(loss, (0, 2)))
  single_tangent = jax.jit(tangent)
  for b in range(batch):
    member = (data[b], indices[b], updates[b])
    assert_same(out[b], np_scatter_nd_update(*member), b)
    want = single_grad(*member, cotangent[b])
    assert_same(grads[0][b], want[0], b)
    assert_same(grads[1][b], want[1], b)
    assert_same(tangents[b], single_tangent(*member, cotangent[b], updates[b]))
  # One write of the batch's rows, each with one linear index.
  jaxpr = str(jax.make_jaxpr(jax.vmap(update))(*args))
  slots = int(np.prod(sizes))
  assert re.findall(r"f32\[([0-9,]+)\] = jaxops_write_rows", jaxpr) == [
    f"{batch * slots},3"
  ], jaxpr


# --- sorted indices: the adjacent-compare test in front of the repeat tests

# kind: (flat targets into the (5, 4) indexed dims, None for an out-of-range
#  tuple; whether the sorted test proves them unique under "drop")
SORTED_KINDS = {
  "sorted_unique": ([0, 2, 3, 7, 8, 9, 13, 15, 16, 19], True),
  "sorted_with_repeats": ([0, 2, 2, 7, 8, 8, 8, 15, 16, 19], False),
  "descending": ([19, 16, 15, 13, 9, 8, 7, 3, 2, 0], False),
  # Two sorted runs: unique, and with a repeat across the runs.
  "partially_sorted": ([0, 2, 3, 7, 8, 1, 4, 5, 6, 9], False),
  "partially_sorted_repeat": ([0, 2, 3, 7, 8, 1, 3, 5, 6, 9], False),
  # Out-of-range tuples (repeated among themselves) after the sorted ones
  # are proved; among or before them the exact test decides.
  "out_of_range_after": ([0, 2, 3, 7, 8, 9, 13, None, None, None], True),
  "out_of_range_among": ([0, 2, None, 7, 8, None, 13, 15, 16, 19], False),
  "out_of_range_before": ([None, None, 3, 7, 8, 9, 13, 15, 16, 19], False),
  "all_out_of_range": ([None] * 10, True),
}
SORTED_SIZES = (5, 4)


def _sorted_case(kind):
  """(data (5, 4, 3), indices (10, 2), updates) of a SORTED_KINDS entry.

  Every third in-range tuple is written with negative indices (the test
  sees the wrapped targets), out-of-range ones alternate past the end and
  before the start.
  """
  flat, _ = SORTED_KINDS[kind]
  sizes = np.asarray(SORTED_SIZES)
  indices = np.zeros((len(flat), 2), np.int64)
  for i, target in enumerate(flat):
    if target is None:
      indices[i] = [sizes[0] + 1, 0] if i % 2 else -sizes - 1
    else:
      indices[i] = np.unravel_index(target, SORTED_SIZES)
      if i % 3 == 0:
        indices[i] -= sizes
  rng = np.random.default_rng(len(kind))
  data = rng.integers(-99, 100, SORTED_SIZES + (3,)).astype(np.float32)
  updates = rng.integers(-99, 100, (len(flat), 3)).astype(np.float32)
  return data, indices, updates


def _in_mode(strategy, jax_mode):
  """The named strategy, with 64-bit targets and keys under x64 (what
  `choose_strategy` picks for large slot counts there)."""
  strategy = STRATEGIES[strategy]
  if jax_mode != "x64" or strategy.target_dtype is None:
    return strategy
  wide = np.dtype(np.int64)
  return strategy._replace(
    target_dtype=wide,
    key_dtype=None if strategy.key_dtype is None else wide,
  )


@pytest.mark.parametrize("kind", SORTED_KINDS)
@pytest.mark.covering_modes
def test_sorted_unique_predicate(kind):
  data, indices, _ = _sorted_case(kind)
  slots = int(np.prod(SORTED_SIZES))
  flat, proved = SORTED_KINDS[kind]
  target = np.array([slots if t is None else t for t in flat], np.int32)
  assert bool(dup.sorted_unique(jnp.asarray(target), slots)) == proved
  # It proves only what the exact tests confirm.
  if proved:
    assert not bool(_repeats(dup.RepeatTest.BITMAP, indices, data.shape))


@pytest.mark.exhaustive(default=2, keep=("column_sort",))
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.covering_modes
def test_sorted_indices_last_wins_every_strategy(jax_mode, strategy):
  rng = np.random.default_rng(17)
  for kind in SORTED_KINDS:
    data, indices, updates = _sorted_case(kind)
    _check_against_loop(
      _in_mode(strategy, jax_mode), data, indices, updates, rng, kind
    )


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("strategy", REPEAT_TESTED)
@pytest.mark.covering_modes
def test_sorted_indices_eager_equals_jit(jax_mode, strategy):
  strategy = _in_mode(strategy, jax_mode)
  for kind, (flat, _) in SORTED_KINDS.items():
    if None in flat:
      continue  # eager calls raise on out-of-range indices
    data, indices, updates = _sorted_case(kind)
    eager = jaxops.scatter_nd_update(data, indices, updates, _strategy=strategy)
    assert_same(eager, np.asarray(_update(strategy)(data, indices, updates)))
    assert_same(eager, np_scatter_nd_update(data, indices, updates), kind)


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize(
  "kinds",
  [
    ["sorted_unique", "out_of_range_after", "all_out_of_range"],
    list(SORTED_KINDS),
  ],
  ids=["all_proved", "mixed"],
)
@pytest.mark.parametrize("strategy", REPEAT_TESTED)
@pytest.mark.covering_modes
def test_sorted_indices_under_vmap(jax_mode, strategy, kinds):
  """One sorted test for the whole batch, in front of the repeat test."""
  cases = [_sorted_case(kind) for kind in kinds]
  rng = np.random.default_rng(19)
  # Unbatched predicates: the sorted test and the repeat test stay conds.
  _check_batch(_in_mode(strategy, jax_mode), kinds, cases, rng, conds=2)


def _winner_mask(data_shape, indices):
  """Per tuple: is it the last in-range tuple of its target (NumPy)."""
  k = indices.shape[-1]
  sizes = np.asarray(data_shape[:k])
  tuples = indices.reshape(-1, k)
  tuples = np.where(tuples < 0, tuples + sizes, tuples)
  last = {}
  for pos, tup in enumerate(map(tuple, tuples)):
    if all(0 <= t < s for t, s in zip(tup, sizes)):
      last[tup] = pos
  mask = np.zeros(len(tuples), bool)
  mask[list(last.values())] = True
  return mask.reshape(indices.shape[:-1])


def _expected_updates_grad(indices, cotangent):
  """d/d updates of sum(out * cotangent): the cotangent at each winner's
  target, 0 for losers and out-of-range tuples."""
  k = indices.shape[-1]
  sizes = np.asarray(cotangent.shape[:k])
  wrapped = np.where(indices < 0, indices + sizes, indices)
  wins = _winner_mask(cotangent.shape, indices)
  safe = np.where(wins[..., None], wrapped, 0)
  gathered = cotangent[tuple(np.moveaxis(safe, -1, 0))]
  wins = wins.reshape(wins.shape + (1,) * (cotangent.ndim - k))
  return np.where(wins, gathered, 0)


@pytest.mark.parametrize(
  "data_shape,lead,k",
  [((6,), (15,), 1), ((4, 3, 2), (3, 4), 1), ((4, 3, 2), (10,), 3)],
)
def test_duplicate_gradients_zero_for_losers(data_shape, lead, k):
  rng = np.random.default_rng(5)
  data, indices, updates = random_case(rng, data_shape, lead, k, unique=False)
  cotangent = rng.standard_normal(data_shape)
  loss = lambda d, u: jnp.sum(
    jaxops.scatter_nd_update(d, indices, u) * cotangent
  )
  grad_d, grad_u = jax.jit(jax.grad(loss, argnums=(0, 1)))(data, updates)
  written = (
    np_scatter_nd_update(np.zeros(data_shape), indices, np.ones(updates.shape))
    == 1
  )
  assert_same(grad_d, np.where(written, 0, cotangent))
  assert_same(grad_u, _expected_updates_grad(indices, cotangent))
  assert not _winner_mask(data_shape, indices).all(), "needs losers"


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize(
  "dtype", [np.float32, np.float64, jnp.bfloat16, np.complex64]
)
@pytest.mark.parametrize(
  "data_shape,lead,k",
  [((6,), (15,), 1), ((5, 4), (9, 2), 2), ((4, 3, 2), (10,), 1)],
)
def test_serial_transpose_marks_in_the_cotangent(dtype, data_shape, lead, k):
  """The CPU path's transpose: rows of one float32 or float64 element
  carry the update positions as marks in the data cotangent's own buffer,
  wider rows and 16-bit and complex ones use the table of positions; either
  way the winners of the serial write (the last in-range tuple of each
  target) get the cotangent, the losers and the dropped tuples zero, and the
  written elements' cotangent is zero. Indices are arguments, some out of
  range (dropped under jit)."""
  rng = np.random.default_rng(11)
  data, indices, updates = random_case(
    rng, data_shape, lead, k, unique=False, dtype=dtype
  )
  indices = indices.copy()
  indices.reshape(-1, k)[::4, 0] = data_shape[0]  # dropped
  cotangent = (rng.standard_normal(data_shape) * 4).astype(dtype)
  assert _winner_mask(data_shape, indices).sum() < np.prod(lead) - 1

  @jax.jit
  def backward(d, i, u, ct):
    f = lambda d, u: jaxops.scatter_nd_update(d, i, u)
    return jax.vjp(f, d, u)[1](ct)

  grad_d, grad_u = backward(data, indices, updates, cotangent)
  wins = _winner_mask(data_shape, indices).reshape(-1)
  sizes = np.asarray(data_shape[:k])
  tuples = indices.reshape(-1, k)
  tuples = np.where(tuples < 0, tuples + sizes, tuples)
  written = np.zeros(data_shape[:k], bool)
  for t in tuples[wins]:
    written[tuple(t)] = True
  written = written.reshape(written.shape + (1,) * (len(data_shape) - k))
  ct = np.asarray(jnp.asarray(cotangent))
  assert_same(grad_d, np.where(written, np.zeros_like(ct), ct))
  assert_same(grad_u, _expected_updates_grad(indices, ct).astype(ct.dtype))


@pytest.mark.jax_modes("x64")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_serial_transpose_builds_no_table(dtype):
  """The CPU path's transpose finds the winners of a serial element write
  into (50, 40) without an int array of one slot per element (its marks
  live in the cotangent's buffer)."""
  grad = jax.grad(
    lambda d, i, u, w: jnp.sum(jaxops.scatter_nd_update(d, i, u) * w),
    argnums=(0, 2),
  )
  data = np.zeros((50, 40), dtype)
  indices = np.array([[1, 2], [1, 2], [3, 0]], np.int32)
  args = (data, indices, np.ones(3, dtype), data)
  text = jax.jit(grad).lower(*args).compile().as_text().split("ENTRY")[1]
  assert not re.search(r"[su](32|64)\[2000\]", text), text


@pytest.mark.usefixtures("scatter_order")
def test_serial_transpose_gathers_from_the_rows_buffer():
  """The serial write's transpose reads its rows from a buffer of their own:
  one fusion computes their unsigned wrap and linearization (`minimum` on
  u32), where XLA copied that chain into each gather of the backward pass,
  each then 2.7x as slow (docs/design.md#serial-transpose)."""
  grad = jax.grad(
    lambda d, i, u, w: jnp.sum(jaxops.scatter_nd_update(d, i, u) * w),
    argnums=(0, 2),
  )
  data = np.zeros((50, 40), F32)
  indices = np.array([[1, 2], [1, 2], [3, 0], [-1, 5]], np.int32)
  args = (data, indices, np.ones(4, F32), data)
  text = jax.jit(grad).lower(*args).compile().as_text()
  computations = text.split("\n\n")
  gathers = [c for c in computations if " gather(" in c]
  chained = [c for c in gathers if re.search(r"u32\[\d+\]\{0\} minimum", c)]
  # The gather that computes the rows' buffer; the winners' search and the
  # cotangents' gathers read it.
  assert len(gathers) >= 3 and len(chained) == 1, text


@pytest.mark.parametrize(
  "strategy", ["table", "rank_table_bitmap", "packed_sort_sorted"]
)
def test_grad_does_not_build_a_data_sized_id_tensor(strategy):
  """JAX's default scatter VJP scatters an id tensor of data's size."""
  data = jnp.zeros((50, 40), jnp.float32)
  indices = jnp.array([[1], [1], [3]], jnp.int32)
  jaxpr = jax.make_jaxpr(
    jax.grad(
      lambda d, u: jnp.sum(
        jaxops.scatter_nd_update(d, indices, u, _strategy=STRATEGIES[strategy])
      ),
      argnums=(0, 1),
    )
  )(data, jnp.ones((3, 40), jnp.float32))
  for eqn in jaxpr.jaxpr.eqns:
    for var in eqn.outvars:
      aval = var.aval
      assert not (
        aval.shape == data.shape and jnp.issubdtype(aval.dtype, jnp.integer)
      ), eqn
    if eqn.primitive.name == "scatter":
      assert eqn.params["unique_indices"], eqn


# --- out of range, checkify, donation


def test_out_of_range_dropped_under_jit_and_clip_mode():
  data = np.arange(5.0)
  indices = np.array([[1], [5], [-6], [-1], [100]])
  updates = np.array([10.0, 11.0, 12.0, 13.0, 14.0])
  out = jax.jit(jaxops.scatter_nd_update)(data, indices, updates)
  assert_same(out, np.array([0, 10, 2, 3, 13.0]))
  clipped = jaxops.scatter_nd_update(data, indices, updates, mode="clip")
  assert_same(clipped, np.array([12, 10, 2, 3, 14.0]))
  assert_same(clipped, np_scatter_nd_update(data, indices, updates, "clip"))


@pytest.mark.parametrize(
  "errors",
  [checkify.user_checks, checkify.index_checks],
  ids=["user_checks", "index_checks"],
)
@pytest.mark.parametrize(
  "strategy", [None, "table", "rank_table_bitmap", "packed_sort_sorted"]
)
@pytest.mark.covering_modes
def test_checkify_flags_out_of_range(errors, strategy):
  # The operator's own check is a user check. index_checks sees no scatter
  # of the default path: its final write is `jaxops._rows.write_rows`, whose
  # redirected losers would be false reports (docs/semantics.md#checkify).
  data, updates = np.zeros((4, 2), np.float32), np.ones((2, 2), np.float32)
  f = checkify.checkify(_update(strategy), errors=errors)
  err, out = f(data, np.array([[1], [4]]), updates)
  if errors is checkify.user_checks:
    assert "ScatterNDUpdate-3: an index tuple is out of range" in err.get()
  else:
    assert err.get() is None
  assert_same(out, np.array([[0, 0], [1, 1], [0, 0], [0, 0]], np.float32))
  err, _ = f(data, np.array([[1], [-4]]), updates)
  assert err.get() is None


@pytest.mark.parametrize(
  ("indices", "flagged"),
  [
    # Into data (4, 2): by k = 1 (the first column) and by k = 2.
    ([[1, 0], [3, -2], [-4, 1]], (False, False)),
    ([[1, 0], [0, -3]], (False, True)),
    ([[4, 0]], (True, True)),
    ([[-5, 0]], (True, True)),
    ([[0, 2]], (False, True)),
  ],
)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.covering_modes
def test_checkify_flags_the_serial_write_before_the_wrap(indices, flagged, k):
  # The CPU's serial write checks the tuples before wrapping them, each
  # coordinate in [-s, s) (jaxops._scatter_nd_update._unsigned_rows).
  indices = np.array(indices)[:, :k]
  updates = np.ones((len(indices),) + (2,) * (2 - k), np.float32)
  f = checkify.checkify(_update(None), errors=checkify.user_checks)
  err, out = f(np.zeros((4, 2), np.float32), indices, updates)
  assert (err.get() is not None) == flagged[k - 1], indices
  want = np_scatter_nd_update(np.zeros((4, 2), np.float32), indices, updates)
  assert_same(out, want)


@pytest.mark.parametrize(
  "strategy", [None, "table", "rank_table_bitmap", "packed_sort_sorted"]
)
def test_user_checks_quiet_for_in_range_duplicates(strategy):
  f = checkify.checkify(_update(strategy), errors=checkify.user_checks)
  err, out = f(
    np.zeros(3, np.float32),
    np.array([[1], [1]]),
    np.array([1.0, 2.0], np.float32),
  )
  assert err.get() is None
  assert_same(out, np.array([0, 2, 0], np.float32))


# A copy of data's buffer, in its shape or in the row view the scatter uses.
_DATA_COPY = r"f32\[(6,4,8|24,8)\]\{[0-9,]*\} copy\("


@pytest.mark.parametrize("unique", [False, True])
@pytest.mark.parametrize("strategy", ["table", "rank_table_bitmap"])
def test_donated_data_is_updated_in_place(unique, strategy):
  indices = jnp.array([[1, 2], [3, 0], [1, 2]], jnp.int32)[: 2 if unique else 3]
  updates = jnp.ones((indices.shape[0], 8), jnp.float32)
  fn = lambda d, i, u: jaxops.scatter_nd_update(
    d, i, u, unique_indices=unique, _strategy=STRATEGIES[strategy]
  )
  donated = jax.jit(fn, donate_argnums=0)
  data = jnp.zeros((6, 4, 8), jnp.float32)
  hlo = donated.lower(data, indices, updates).compile().as_text()
  assert "input_output_alias={ {}: (0, {}" in hlo
  assert not re.search(_DATA_COPY, hlo), hlo
  # The undonated version does copy data (so the regex can match).
  assert re.search(
    _DATA_COPY, jax.jit(fn).lower(data, indices, updates).compile().as_text()
  )
  pointer = data.unsafe_buffer_pointer()
  out = donated(data, indices, updates)
  assert data.is_deleted()
  assert out.unsafe_buffer_pointer() == pointer
  expected = np.zeros((6, 4, 8), np.float32)
  expected[1, 2] = expected[3, 0] = 1
  assert_same(out, expected)


# --- transformations

VMAP_CASES = [
  ((6, 3), (4,), 1, True),
  ((6, 3), (5,), 2, False),
  ((4, 3, 2), (2, 2), 1, False),
]


@pytest.mark.parametrize("data_shape,lead,k,unique", VMAP_CASES)
def test_vmap_each_argument_matches_loop(data_shape, lead, k, unique):
  rng = np.random.default_rng(8)
  batch = [
    random_case(rng, data_shape, lead, k, unique=unique) for _ in range(3)
  ]
  fixed = random_case(rng, data_shape, lead, k, unique=unique)
  stacked = [np.stack(arrays) for arrays in zip(*batch)]
  for argnum in (0, 1, 2, None):
    in_axes = [None] * 3
    args = list(fixed)
    if argnum is None:
      in_axes, args = [0] * 3, stacked
    else:
      in_axes[argnum] = 0
      args[argnum] = stacked[argnum]
    out = jax.jit(jax.vmap(jaxops.scatter_nd_update, in_axes=in_axes))(*args)
    for j in range(3):
      loop_args = [a[j] if ax == 0 else a for a, ax in zip(args, in_axes)]
      assert_same(
        out[j], np_scatter_nd_update(*loop_args), f"argnum {argnum}, batch {j}"
      )


@pytest.mark.parametrize(
  "data_shape,lead,k,unique",
  [
    ((5, 4), (3,), 2, True),
    ((5, 4), (2, 2), 1, True),
    ((5, 3), (6,), 1, False),
  ],
  ids=["elements", "slices", "duplicates"],
)
@pytest.mark.exhaustive(default=2, keep=("duplicates",))
@pytest.mark.jax_modes("x64")  # finite differences need float64
def test_check_grads_order2_fwd_rev(data_shape, lead, k, unique):
  rng = np.random.default_rng(9)
  data, indices, updates = random_case(rng, data_shape, lead, k, unique=unique)
  check_grads(
    jax.jit(lambda d, u: jaxops.scatter_nd_update(d, indices, u)),
    (data, updates),
    order=2,
    modes=["fwd", "rev"],
    atol=1e-6,
    rtol=1e-6,
  )


def test_integer_data_gets_float0_tangents():
  data = np.arange(4, dtype=np.int32)
  indices = np.array([[1]])
  grads = jax.grad(
    lambda d, i, u: jnp.sum(jaxops.scatter_nd_update(d, i, u)).astype(float),
    argnums=(0, 1, 2),
    allow_int=True,
  )(data, indices, np.array([7], np.int32))
  assert all(g.dtype == jax.dtypes.float0 for g in grads)


# NumPy arrays have at most 64 dims; JAX's more, and so do the operators'
# inputs (the index work never makes a NumPy array of an input's rank).
@pytest.mark.parametrize("rank", [64, 65])
def test_rank_64_and_65(rank):
  data = jnp.zeros((2,) + (1,) * (rank - 1), jnp.float32)
  updates = jnp.ones((1,) * rank, jnp.float32)
  for call in (jaxops.scatter_nd_update, jax.jit(jaxops.scatter_nd_update)):
    out = call(data, jnp.ones((1, 1), jnp.int32), updates)
    assert out.shape == data.shape
    assert_same(out.reshape(-1), np.array([0, 1], np.float32))
