"""Unit tests for ScatterElementsUpdate-12 (`jaxops.scatter_elements_update`)
and, through it, the reduction engine `jaxops._reduce`.

Values are compared exactly (bits, signed zeros) with the serial NumPy loop
of tests/support/reductions.py; derivatives with `check_grads` on float64.
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
from jaxops import _common, _fold, _order, _quotient, _reduce, _sort, shapes
from jaxops import _scatter_elements_update as _seu
from tests.support import generators as gen
from tests.support import modes, rejections, scatter
from tests.support.asserts import assert_same, assert_same_bits
from tests.support.reductions import nan_bits_case, np_scatter_elements

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

OP = "ScatterElementsUpdate-12"
F32, I32 = np.float32, np.int32
REDUCTIONS = ("none", "sum", "prod", "min", "max", "mean")

# --- examples and decided semantics


def test_docstring_example_sum():
  out = jaxops.scatter_elements_update(
    np.array([1.0, 2.0, 3.0, 4.0], F32),
    [1, 1, 3],
    [10.0, 20.0, 5.0],
    reduction="sum",
  )
  assert_same(out, np.array([1, 32, 3, 9], F32))


def test_integer_mean_rounds_toward_minus_infinity():
  # The spec's rule; OpenVINO's CPU plugin truncates to -2 (RT-14).
  out = jaxops.scatter_elements_update(
    np.array([-1, 7], I32), [0, 0], np.array([-2, -4], I32), reduction="mean"
  )
  assert_same(out, np.array([-3, 7], I32))


def test_int8_mean_accumulates_wide():
  # 100 and 100 average to 100; OpenVINO's CPU plugin wraps to -28 (RT-15).
  out = jaxops.scatter_elements_update(
    np.array([100, 1], np.int8),
    [0],
    np.array([100], np.int8),
    reduction="mean",
  )
  assert_same(out, np.array([100, 1], np.int8))


@pytest.mark.jax_modes("x64")
def test_int64_mean_does_not_wrap():
  big = np.iinfo(np.int64).max - 1
  out = jaxops.scatter_elements_update(
    np.array([big], np.int64),
    [0, 0],
    np.array([big, big], np.int64),
    reduction="mean",
  )
  assert_same(out, np.array([big], np.int64))


# Integer mean with many values in one slot: the remainders' sum reaches
# about count**2, which x32 mode once summed in uint32 (65,537 values of -1
# gave -65537). Every update goes to slot 0 (slots 1 and 2 keep data), and
# each has the largest remainder, c - 1 for c values: k * c - 1 for random
# k, as far as the dtype holds such values (else -1, or the unsigned max).
# The last count splits the remainders into three digits in x32 mode. Each
# case runs eagerly or jitted by the parity of count and use_init_val, so
# that every count and dtype meets both (a compilation of millions of
# updates each).
MEAN_COUNTS = (65535, 65536, 65537, 70000, 2**21 + 5)
MEAN_DTYPES = (
  np.int8,
  np.int16,
  np.int32,
  np.uint8,
  np.uint32,
  pytest.param(np.int64, marks=pytest.mark.jax_modes("x64")),
)


@pytest.mark.exhaustive(default=4)
@pytest.mark.parametrize("use_init_val", (True, False))
@pytest.mark.parametrize("dtype", MEAN_DTYPES, ids=gen.dtype_id)
@pytest.mark.parametrize("count", MEAN_COUNTS)
def test_integer_mean_of_many_values_in_one_slot(count, dtype, use_init_val):
  rng = np.random.default_rng(count)
  info = np.iinfo(dtype)
  c = count + use_init_val
  low, high = -(-(info.min + 1) // c), (info.max + 1) // c
  if low > high:
    updates = np.full(count, info.max, dtype)
  else:
    k = rng.integers(low, high, count, endpoint=True, dtype=np.int64)
    # Wraps in int64 where k * c is 2**63: k * c - 1 is right again.
    updates = (k * c - 1).astype(dtype)
  data = np.array([info.min, info.max, 7], dtype)
  total = int(updates.astype(object).sum()) + use_init_val * int(data[0])
  expected = data.copy()
  expected[0] = total // c
  jitted = use_init_val == (count % 2 == 0)
  fn = _jitted if jitted else jaxops.scatter_elements_update
  out = fn(
    data,
    np.zeros(count, np.int32),
    updates,
    reduction="mean",
    use_init_val=use_init_val,
  )
  assert_same(out, expected)


# --- the float mean's quotient: correctly rounded on every backend
# (jaxops._quotient, docs/design.md#mean-quotient)


def _float32_quotients(n):
  """(x, c) over the corrected range: random significands and exponents,
  all-ones significands, exact quotients; counts 1..300 and up to 2**24."""
  rng = np.random.default_rng(31)
  x = rng.uniform(1, 2, n) * 2.0 ** rng.uniform(-75, 124, n)
  x = (x * rng.choice([-1.0, 1.0], n)).astype(F32)
  c = rng.integers(1, 2**24, n, endpoint=True).astype(F32)
  c[: n // 4] = rng.integers(1, 300, n // 4)
  part = slice(n // 4, n // 2)
  x[part] = F32(2**24 - 1) * 2.0 ** rng.integers(-50, 100, n // 4)
  exact = slice(n // 2, 3 * n // 4)
  x[exact] = rng.integers(1, 2**12, n // 4) * c[exact]
  return x, c


def test_mean_quotient_corrects_a_division_within_two_ulp():
  # XLA:GPU divides float32 with PTX's div.full.f32 (within 2 ulp: an H200
  # gave other bits than the CPU for jaxops' means), TPUs through a
  # reciprocal. From any quotient within 2 ulp the correction finds the
  # correctly rounded one, NumPy's.
  x, c = _float32_quotients(1 << 16)
  want = x / c
  nearest = jax.jit(_quotient.nearest)
  for ulps in (-2, -1, 0, 1, 2):
    q = want
    for _ in range(abs(ulps)):
      q = np.nextafter(q, F32(np.copysign(np.inf, ulps)))
    assert_same_bits(nearest(x, c, q), want, f"{ulps} ulp")


QUOTIENT_DTYPES = {
  "float32": F32,
  "bfloat16": jnp.bfloat16,
  "float16": np.float16,
  "float64": pytest.param(np.float64, marks=pytest.mark.jax_modes("x64")),
}


# The CPU's path (the backend divides) and every other platform's (the
# correction), both in every dtype's case: `_quotient` is small.
QUOTIENT_PATHS = ("serial", "constructed")


@pytest.fixture
def quotient_path(request, monkeypatch):
  if request.param == "constructed":
    monkeypatch.setenv(_order.ENV_VAR, "constructed")
  else:
    monkeypatch.delenv(_order.ENV_VAR, raising=False)
  return request.param


@pytest.mark.exhaustive(default=2, keep=("float32",))
@pytest.mark.parametrize("quotient_path", QUOTIENT_PATHS, indirect=True)
@pytest.mark.parametrize("dtype", QUOTIENT_DTYPES.values(), ids=QUOTIENT_DTYPES)
def test_mean_quotient_and_its_derivatives_round_correctly(
  dtype, quotient_path
):
  # Over the whole range, specials included (outside [2**-75, 2**125] the
  # backend's quotient stands), eager and jitted; the narrow floats are
  # divided in float32 and rounded once more, as XLA:CPU does. The jvp,
  # vjp and transpose divide the tangent the same way. On CPU the backend
  # divides; the constructed path (every other platform's) corrects.
  finfo = jnp.finfo(dtype)
  specials = [0.0, -0.0, np.inf, -np.inf, np.nan, float(finfo.max)]
  # Quotients that stay normal: XLA:CPU flushes subnormal results to zero.
  specials += [2.0**-100, -(2.0**-110)]
  specials += [2.0**-75, 2.0**125, -(2.0**-76), 3.0 * 2.0**124]
  rng = np.random.default_rng(32)
  x = np.concatenate([specials, rng.standard_normal(4000) * 1e3])
  with np.errstate(over="ignore"):  # 2**125 is inf in float16
    x = x.astype(dtype)
  c = rng.integers(1, 2**12, x.size).astype(dtype)
  wide = np.float64 if dtype == np.float64 else F32
  want = (x.astype(wide) / c.astype(wide)).astype(dtype)
  quotient = functools.partial(_quotient.quotient, count=c)
  assert_same_bits(quotient(x), want, "eager")
  assert_same_bits(jax.jit(quotient)(x), want, "jit")
  ct = rng.standard_normal(x.size).astype(dtype)
  want_ct = (ct.astype(wide) / c.astype(wide)).astype(dtype)
  finite = np.where(np.isfinite(x), x, 0).astype(dtype)
  vjp = jax.jit(lambda x, ct: jax.vjp(quotient, x)[1](ct)[0])
  assert_same_bits(vjp(finite, ct), want_ct, "vjp")
  assert_same_bits(jax.jvp(quotient, (finite,), (ct,))[1], want_ct, "jvp")
  transposed = jax.linear_transpose(quotient, finite)
  assert_same_bits(transposed(ct)[0], want_ct, "linear_transpose")
  batched = jax.jit(jax.vmap(quotient))(x.reshape(1, -1))
  assert_same_bits(batched[0], want, "vmap")
  corrects = lambda platform: (
    "stablehlo.and"
    in jax.export.export(jax.jit(quotient), platforms=(platform,))(
      x
    ).mlir_module()
  )
  narrow = np.dtype(dtype).itemsize <= 4
  assert corrects("cuda") == narrow
  assert corrects("cpu") == (narrow and quotient_path == "constructed")


@pytest.mark.parametrize("quotient_path", QUOTIENT_PATHS, indirect=True)
@pytest.mark.parametrize("use_init_val", (True, False))
def test_mean_gradients_are_rounded_quotients(use_init_val, quotient_path):
  # d mean / d value = 1 / count: the cotangent divided by the count,
  # correctly rounded, in data's rows and in each update's.
  rng = np.random.default_rng(33)
  data = rng.standard_normal((9, 4)).astype(F32)
  indices = rng.integers(0, 8, (60, 4)).astype(I32)  # row 8 untouched
  updates = rng.standard_normal((60, 4)).astype(F32)
  ct = rng.standard_normal((9, 4)).astype(F32)
  count = np.full((9, 4), int(use_init_val), np.int32)
  np.add.at(count, (indices, np.arange(4)), 1)
  divided = ct / np.maximum(count, 1).astype(F32)

  def f(d, u):
    return jaxops.scatter_elements_update(
      d, indices, u, reduction="mean", use_init_val=use_init_val
    )

  out, vjp = jax.vjp(jax.jit(f), data, updates)
  assert_same(
    out, np_scatter_elements(data, indices, updates, 0, "mean", use_init_val)
  )
  d_data, d_updates = vjp(ct)
  touched = count > int(use_init_val)
  want_data = np.where(touched, divided if use_init_val else 0, ct)
  assert_same(d_data, want_data.astype(F32))
  assert_same(d_updates, np.take_along_axis(divided, indices, 0))


# The long division of the remainders' digit sums, in uint32 (x32 mode's
# type) up to the largest count an int32 index reaches: random digit sums at
# their bounds (each below c * 2**width, their value below c * c), against
# Python's floor division.
@pytest.mark.parametrize("most", (2, 65535, 65536, 2**21 + 5, 2**31 - 1))
def test_remainder_digit_sums_divide_exactly(most):
  rng = np.random.default_rng(most)
  width = 32 - most.bit_length()
  digits = max(1, -(-(most - 1).bit_length() // width))
  counts = [most, 1, *rng.integers(1, most, 62, endpoint=True).tolist()]
  sums, expected = [], []
  for c in counts:
    bound = c * ((1 << width) - 1)
    row = rng.integers(0, bound, digits, endpoint=True).tolist()
    value = sum(d << (width * j) for j, d in enumerate(row))
    while value > c * (c - 1):  # Lower the top digits until it fits.
      top = max(j for j, d in enumerate(row) if d)
      row[top] //= 2
      value = sum(d << (width * j) for j, d in enumerate(row))
    sums.append(row)
    expected.append(value // c)
  out = _reduce._divide_digits(
    jnp.asarray(np.array(sums, np.uint32)),
    jnp.asarray(np.array(counts, np.uint32)),
    width,
  )
  assert_same(out, np.array(expected, np.uint32))


def test_use_init_val_false_starts_from_neutral_and_keeps_untargeted():
  data = np.array([1.0, 2.0, 3.0, 9.0], F32)
  idx, upd = [0, 0, 2], np.array([5.0, 6.0, 7.0], F32)
  for reduction, expected in {
    "sum": [11, 2, 7, 9],
    "prod": [30, 2, 7, 9],
    "max": [6, 2, 7, 9],
    "min": [5, 2, 7, 9],
    "mean": [5.5, 2, 7, 9],
  }.items():
    out = jaxops.scatter_elements_update(
      data, idx, upd, reduction=reduction, use_init_val=False
    )
    assert_same(out, np.array(expected, F32), reduction)


@pytest.mark.scatter_orders
def test_nan_propagates_under_min_and_max(scatter_order):
  data = np.array([np.nan, 1, 1], F32)
  idx, upd = [0, 1, 1], np.array([5, np.nan, 2], F32)
  for reduction in ("min", "max"):
    out = jaxops.scatter_elements_update(data, idx, upd, reduction=reduction)
    assert_same(out, np.array([np.nan, np.nan, 1], F32), reduction)


# min/max keep the bits of a slot whose result is data's own element: one
# no update reaches, or one where data wins (a NaN with its payload); a NaN
# from an update is the canonical NaN. Slots nothing targets came back as
# the canonical NaN before (payload and sign lost).
NAN_DTYPES = (
  jnp.float8_e5m2,  # the 8-bit float with NaN payloads
  np.float16,
  jnp.bfloat16,
  np.float32,
  pytest.param(np.float64, marks=pytest.mark.jax_modes("x64")),
)


@pytest.mark.exhaustive(default=4)
@pytest.mark.parametrize("run", modes.RUNS)
@pytest.mark.parametrize("use_init_val", (True, False))
@pytest.mark.parametrize("dtype", NAN_DTYPES, ids=gen.dtype_id)
@pytest.mark.parametrize("reduction", ("min", "max"))
@pytest.mark.scatter_orders(one=True)
def test_min_max_keep_the_bits_of_data_they_keep(
  reduction, dtype, use_init_val, run, scatter_order
):
  data, targets, updates, expected = nan_bits_case(
    dtype, reduction, use_init_val
  )
  out = modes.run_as(
    run,
    lambda d, u: jaxops.scatter_elements_update(
      d, targets, u, reduction=reduction, use_init_val=use_init_val
    ),
    data,
    updates,
  )
  assert_same_bits(out, expected)


@pytest.mark.scatter_orders
def test_signed_zeros_are_ordered_under_min_and_max(scatter_order):
  data = np.array([0.0, -0.0], F32)
  upd = np.array([-0.0, 0.0], F32)
  assert_same(
    jaxops.scatter_elements_update(data, [0, 1], upd, reduction="max"),
    np.array([0.0, 0.0], F32),
  )
  assert_same(
    jaxops.scatter_elements_update(data, [0, 1], upd, reduction="min"),
    np.array([-0.0, -0.0], F32),
  )


# The keys that order floats were as wide as the float, and a NaN's key one
# of the extremes: the 8- and 4-bit floats, whose extreme patterns are numbers
# (float8_e4m3fnuz's 0x7F is 240, float4_e2m1fn has no NaN), had no key type
# at all (KeyError) before. Every number of the dtype, each slot taking a
# shuffled run of them, data included: the ties of the two zeros, the
# infinities, the extremes.
@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("dtype", gen.NARROW_FLOATS, ids=gen.dtype_id)
@pytest.mark.parametrize("reduction", ("min", "max"))
@pytest.mark.scatter_orders(one=True)
def test_min_max_order_every_number_of_the_narrow_floats(
  reduction, dtype, scatter_order
):
  rng = np.random.default_rng(5)
  numbers = gen.every_number(dtype)
  updates = rng.permutation(np.concatenate([numbers, numbers]))
  indices = rng.integers(0, 5, updates.shape)
  data = rng.choice(numbers, 5)
  for init in (True, False):
    out = _jitted(
      data, indices, updates, 0, reduction=reduction, use_init_val=init
    )
    assert_same_bits(
      out,
      np_scatter_elements(data, indices, updates, 0, reduction, init),
      f"use_init_val={init}",
    )


def test_bool_rules():
  data = np.array([True, False, True, False])
  idx = [0, 1, 1, 2, 3, 3]
  upd = np.array([False, True, False, False, False, False])
  for reduction, expected in {
    "sum": [True, True, True, False],
    "max": [True, True, True, False],
    "prod": [False, False, False, False],
    "min": [False, False, False, False],
  }.items():
    out = jaxops.scatter_elements_update(data, idx, upd, reduction=reduction)
    assert_same(out, np.array(expected), reduction)


# --- shape rule and bad inputs

# name: (data, indices and updates as abstract values (`scatter.arrays`),
#  kwargs, exception, message regex)
BAD_INPUTS = {
  "rank_mismatch": (
    "f32[3,3] i32[3] f32[3]",
    {},
    ValueError,
    r"^rank\(indices\)=1 must equal rank\(data\)=2",
  ),
  "updates_shape": (
    "f32[3,3] i32[2,3] f32[2,2]",
    {},
    ValueError,
    r"^updates shape \(2, 2\) must equal indices shape \(2, 3\)",
  ),
  "non_axis_dim_too_long": (
    "f32[3,3] i32[2,4] f32[2,4]",
    {},
    ValueError,
    r"^indices.shape\[1\]=4 must be <= data.shape\[1\]=3",
  ),
  "axis_out_of_range": (
    "f32[3,3] i32[2,3] f32[2,3]",
    {"axis": 2},
    ValueError,
    r"^axis=2 must be in \[-r, r-1\] = \[-2, 1\]",
  ),
  "rank_0_data": (
    "f32[] i32[] f32[]",
    {},
    ValueError,
    r"^data must have rank >= 1",
  ),
  "bad_reduction": (
    "f32[3] i32[2] f32[2]",
    {"reduction": "sub"},
    ValueError,
    r"^reduction='sub' must be one of",
  ),
  "bool_mean": (
    "bool[3] i32[2] bool[2]",
    {"reduction": "mean"},
    TypeError,
    r"^reduction='mean' is not defined for bool data",
  ),
  "complex_max": (
    "c64[3] i32[2] c64[2]",
    {"reduction": "max"},
    TypeError,
    r"not defined for complex data",
  ),
  "float_indices": (
    "f32[3] f32[2] f32[2]",
    {},
    TypeError,
    r"^indices must have an integer dtype, got float32",
  ),
  "updates_dtype": (
    "f32[3] i32[2] i32[2]",
    {},
    TypeError,
    r"^updates dtype int32 must equal data dtype float32",
  ),
  "use_init_val_not_bool": (
    "f32[3] i32[2] f32[2]",
    {"use_init_val": 1},
    TypeError,
    r"^use_init_val must be a Python bool, got int 1",
  ),
  "bad_mode": (
    "f32[3] i32[2] f32[2]",
    {"mode": "fill"},
    ValueError,
    r"^mode='fill' must be one of",
  ),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_inputs_raise_at_trace_time(name):
  avals, kwargs, exc, pattern = BAD_INPUTS[name]
  shape_only = exc is ValueError and set(kwargs) <= {"axis"}
  rejections.assert_rejected(
    OP,
    exc,
    pattern,
    operator=jaxops.scatter_elements_update,
    shape_rule=shapes.scatter_elements_update if shape_only else None,
    arrays=scatter.arrays(avals),
    attrs=kwargs,
  )


# Bad input a demanding new user tries, eagerly and under jit
# (`scatter.bad_calls`).
BAD_CALLS = scatter.bad_calls(
  [0],
  (np.zeros((2, 2), F32), rejections.RAGGED_LIST, np.ones((2, 2), F32)),
  (np.zeros((2, 2), F32), [[0, 1], [1, 0]], [[1.0], [2.0, 3.0]]),
  lambda indices: (
    np.zeros((2, 1), F32),
    indices,
    np.ones((len(indices), 1), F32),
  ),
)


@pytest.mark.parametrize("reduction", ("none", "sum"))
@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_call(name, reduction, jax_mode):
  rejections.assert_scatter_rejected(
    OP,
    BAD_CALLS[name],
    jax_mode,
    jaxops.scatter_elements_update,
    reduction=reduction,
  )


def test_shape_rule_allows_a_longer_axis():
  assert shapes.scatter_elements_update((3, 4), (7, 2), (7, 2), axis=0) == (
    3,
    4,
  )
  assert shapes.scatter_elements_update((3, 4), (2, 9), (2, 9), -1) == (3, 4)


def test_python_int_updates_that_do_not_fit_are_rejected():
  data, indices = np.zeros(3, np.int8), np.array([0])
  rejections.assert_op_error(
    OP,
    ValueError,
    r"^updates value 1000 does not fit data dtype int8",
    lambda: jaxops.scatter_elements_update(data, indices, [1000]),
  )
  rejections.assert_op_error(
    OP,
    ValueError,
    r"^updates value -1 does not fit data dtype uint8",
    lambda: jax.jit(lambda d, i: jaxops.scatter_elements_update(d, i, [-1]))(
      data.astype(np.uint8), indices
    ),
  )


def test_eager_out_of_range_raises_index_error():
  with pytest.raises(IndexError, match=OP + r": indices\[1, 0\]=3 is out"):
    jaxops.scatter_elements_update(
      np.zeros((3, 2), F32), np.array([[0, 1], [3, 0]]), np.ones((2, 2), F32)
    )


# --- values against the serial reference

DTYPES = (
  np.float32,
  np.float16,
  jnp.bfloat16,
  *gen.NARROW_FLOATS,
  np.int8,
  np.uint8,
  np.int32,
  *gen.NARROW_INTS,
  np.bool_,
  np.complex64,
)


def _case(rng, dtype, data_shape, indices_shape, axis, repeats=True):
  size = data_shape[axis]
  indices = rng.integers(-size, size if repeats else 1, indices_shape)
  data = gen.random_values(rng, data_shape, dtype)
  updates = gen.random_values(rng, indices_shape, dtype)
  return data, indices, updates


def _valid(reduction, dtype):
  if reduction == "mean" and np.dtype(dtype) == np.bool_:
    return False  # a bad-input row
  if np.issubdtype(dtype, np.complexfloating):
    # min/max: bad-input rows; prod and mean: XLA's complex multiply and
    # divide round unlike NumPy's, so the reference would differ per step,
    # not by order.
    return reduction in ("none", "sum")
  return True


COMBINATIONS = [
  pytest.param(dtype, reduction, id=f"{reduction}-{gen.dtype_id(dtype)}")
  for reduction in REDUCTIONS
  for dtype in DTYPES
  if _valid(reduction, dtype)
]


_jitted = jax.jit(
  jaxops.scatter_elements_update,
  static_argnames=("axis", "reduction", "use_init_val"),
)


# (data shape, indices shape, axis, use_init_val, eager): each combination
# runs one form, a compilation, alternating over dtypes and reductions so that
# every reduction and every dtype meets both (eager == jit is the
# field-config tests' matter).
FORMS = (
  ((3, 4), (7, 4), 0, True, True),
  ((2, 3, 2), (2, 5, 1), -2, False, False),
)


@pytest.mark.exhaustive(default=4)
@pytest.mark.parametrize("dtype, reduction", COMBINATIONS)
@pytest.mark.covering_modes
def test_every_reduction_and_dtype_matches_serial_reference(dtype, reduction):
  rng = np.random.default_rng(REDUCTIONS.index(reduction))
  form = (REDUCTIONS.index(reduction) + DTYPES.index(dtype)) % len(FORMS)
  data_shape, indices_shape, axis, init, eager = FORMS[form]
  data, indices, updates = _case(rng, dtype, data_shape, indices_shape, axis)
  expected = np_scatter_elements(data, indices, updates, axis, reduction, init)
  fn = jaxops.scatter_elements_update if eager else _jitted
  out = fn(data, indices, updates, axis, reduction=reduction, use_init_val=init)
  assert_same(out, expected, f"{data_shape} {axis} init={init} eager={eager}")


# Every integer dtype as indices, a negative and an out-of-range-for-int8
# one where the dtype holds them (an axis of 300: int8 indices are widened
# before the wrap).
@pytest.mark.parametrize("index_dtype", gen.EVERY_INDEX_DTYPE, ids=gen.dtype_id)
def test_index_dtypes(index_dtype):
  rng = np.random.default_rng(6)
  info = jnp.iinfo(index_dtype)
  indices = rng.integers(max(-300, int(info.min)), 300, size=(40, 2))
  indices = np.minimum(indices, min(int(info.max), 299)).astype(index_dtype)
  data = gen.random_values(rng, (300, 2), F32)
  updates = gen.random_values(rng, (40, 2), F32)
  for reduction in ("none", "sum"):
    assert_same(
      _jitted(data, indices, updates, 0, reduction=reduction),
      np_scatter_elements(data, indices, updates, 0, reduction),
      reduction,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.covering_modes
def test_unique_indices_promise_gives_the_same_result(reduction):
  rng = np.random.default_rng(1)
  data = rng.standard_normal((6, 3)).astype(F32)
  indices = np.stack([rng.permutation(6)[:4] for _ in range(3)], 1)
  updates = rng.standard_normal((4, 3)).astype(F32)
  for init in (True, False):
    out = jaxops.scatter_elements_update(
      data,
      indices,
      updates,
      reduction=reduction,
      use_init_val=init,
      unique_indices=True,
    )
    assert_same(
      out, np_scatter_elements(data, indices, updates, 0, reduction, init)
    )


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("reduction", ("sum", "prod", "mean"))
@pytest.mark.usefixtures("constructed")
def test_long_runs_fold_in_documented_chunks(reduction, monkeypatch):
  # Runs up to CHUNK are serial; beyond, chunks fold serially, then their
  # results (docs/semantics.md#reduction-order).
  monkeypatch.setattr(_fold, "CHUNK", 4)
  rng = np.random.default_rng(2)
  data = rng.standard_normal((3,)).astype(F32)
  indices = np.array([0] * 4 + [1] * 11 + [0] * 3 + [2])
  rng.shuffle(indices)
  updates = (rng.standard_normal(indices.shape) * 1e3).astype(F32)
  out = jaxops.scatter_elements_update(
    data, indices, updates, reduction=reduction
  )
  expected = np_scatter_elements(data, indices, updates, 0, reduction, chunk=4)
  assert not np.array_equal(
    expected, np_scatter_elements(data, indices, updates, 0, reduction)
  )
  assert_same(out, expected)
  # Up to CHUNK updates per slot the order is serial.
  short = np.array([0, 1, 0, 0, 2, 0])
  out = jaxops.scatter_elements_update(
    data, short, updates[:6], reduction=reduction
  )
  assert_same(out, np_scatter_elements(data, short, updates[:6], 0, reduction))


@pytest.mark.parametrize("mode", ("drop", "clip"))
def test_out_of_range_under_jit(mode):
  data = np.arange(6, dtype=F32).reshape(3, 2)
  indices = np.array([[5, -1], [-7, 0], [1, 2**31 - 1]], np.int32)
  updates = np.full((3, 2), 10, F32)
  for reduction in ("none", "sum", "max"):
    out = jax.jit(
      functools.partial(
        jaxops.scatter_elements_update, reduction=reduction, mode=mode
      )
    )(data, indices, updates)
    expected = np_scatter_elements(
      data, indices, updates, 0, reduction, mode=mode
    )
    assert_same(out, expected, reduction)


def test_zero_size_inputs():
  data = np.zeros((2, 0), F32)
  out = jaxops.scatter_elements_update(
    data, np.zeros((2, 0), I32), data, reduction="sum"
  )
  assert_same(out, data)
  data = np.ones((3,), F32)
  out = jaxops.scatter_elements_update(
    data, np.zeros((0,), I32), np.zeros((0,), F32), reduction="prod"
  )
  assert_same(out, data)


# --- indices shared along the other dims: the fold by rows

# (data shape, axis, reduction, use_init_val, mode, dtype): one index per
# position along axis, broadcast over the other dims (a graph layer's
# destination node over the features), so the fold runs by rows (and, on
# CPU's serial path, the scatter: float min and max too).
SHARED = (
  ((6, 5), 0, "none", True, "drop", F32),
  ((4, 6), 1, "none", True, "clip", jnp.bfloat16),
  ((6, 5), 0, "sum", True, "drop", F32),
  ((5, 4), 0, "max", True, "drop", F32),
  ((4, 6), 1, "min", False, "clip", jnp.bfloat16),
  ((4, 7), 1, "prod", False, "drop", F32),
  ((3, 4, 5), -1, "mean", True, "clip", np.float16),
  ((5, 3, 2), 1, "sum", False, "clip", np.complex64),
  ((6, 3), -2, "mean", False, "drop", jnp.bfloat16),
)


def _shared_case(rng, data_shape, axis, dtype, mode, m=13):
  size = data_shape[axis]
  row = rng.integers(-size, size + (2 if mode == "clip" else 0), m)
  index_shape = [
    m if k == axis % len(data_shape) else d for k, d in enumerate(data_shape)
  ]
  along = [
    m if k == axis % len(data_shape) else 1 for k in range(len(data_shape))
  ]
  indices = np.broadcast_to(row.reshape(along), index_shape).copy()
  data = gen.random_values(rng, data_shape, dtype)
  return data, indices, gen.random_values(rng, index_shape, dtype)


@pytest.fixture
def rows_at_any_size(monkeypatch):
  """The row branch (the fold's on the constructed path, the scatter's on
  the serial one) for the small shapes of these tests."""
  monkeypatch.setattr(_seu, "ROWS_MIN_ELEMENTS", 0)


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize(
  "data_shape, axis, reduction, init, mode, dtype",
  SHARED,
  ids=[f"{r}-{gen.dtype_id(t)}-axis{a}" for _, a, r, _, _, t in SHARED],
)
@pytest.mark.usefixtures("rows_at_any_size")
@pytest.mark.covering_modes
@pytest.mark.scatter_orders
def test_shared_indices_fold_by_rows_with_the_serial_bits(
  data_shape, axis, reduction, init, mode, dtype, scatter_order
):
  rng = np.random.default_rng(5)
  data, indices, updates = _shared_case(rng, data_shape, axis, dtype, mode)
  fn = jax.jit(
    functools.partial(
      jaxops.scatter_elements_update,
      axis=axis,
      reduction=reduction,
      use_init_val=init,
      mode=mode,
    )
  )
  expected = np_scatter_elements(
    data, indices, updates, axis, reduction, init, mode=mode
  )
  assert_same(fn(data, indices, updates), expected, "shared")
  # The rows branch alone: lax.cond traces both, so only a direct call shows
  # that the branch taken for shared indices is right on its own.
  if reduction == "none":  # The switch picks the path, as for the call.
    reduce = functools.partial(_seu._write_none, unique_indices=False)
  else:
    reduce = functools.partial(
      _reduce.reduce_rows,
      reduction=reduction,
      use_init_val=init,
      unique_indices=False,
      serial=scatter_order == "serial",
    )
  by_rows = _seu._by_rows(
    jnp.asarray(data),
    jnp.asarray(indices),
    jnp.asarray(updates),
    axis % data.ndim,
    _common.canonicalize_mode(mode, OP, ("drop", "clip")),
    reduce,
  )
  assert_same(by_rows, expected, "rows branch")
  # One element off the shared index: the elements branch, same rule.
  indices.flat[-1] = (indices.flat[-1] + 1) % data_shape[axis]
  expected = np_scatter_elements(
    data, indices, updates, axis, reduction, init, mode=mode
  )
  assert_same(fn(data, indices, updates), expected, "one index differs")


@pytest.mark.usefixtures("rows_at_any_size", "constructed")
def test_shared_indices_long_runs_chunk_as_elements(monkeypatch):
  # The chunked order beyond CHUNK (docs/semantics.md#reduction-order) is
  # per slot, so rows and elements chunk alike. Shapes of their own: the
  # patched CHUNK must not meet a cached trace.
  monkeypatch.setattr(_fold, "CHUNK", 4)
  rng = np.random.default_rng(6)
  data, indices, updates = _shared_case(rng, (2, 3), 0, F32, "drop", m=19)
  updates = (updates * 1e3).astype(F32)
  reduce = functools.partial(_reduce.reduce_rows, reduction="sum")
  args = (jnp.asarray(data), jnp.asarray(indices), jnp.asarray(updates), 0)
  drop = _common.canonicalize_mode("drop", OP, ("drop",))
  assert_same(
    _seu._by_rows(*args, drop, reduce), _seu._by_elements(*args, drop, reduce)
  )
  assert_same(
    jaxops.scatter_elements_update(data, indices, updates, reduction="sum"),
    _seu._by_elements(*args, drop, reduce),
  )


@pytest.mark.parametrize(
  "slots, n", ((5, 40), (100_000, 30_000)), ids=("int32-keys", "int64-keys")
)
def test_the_fold_sorts_stably_by_target(slots, n):
  # 100_001 * 30_000 > 2**31: the packed keys need 64 bits, which the sort
  # primitive lowers itself in x32 mode (docs/design.md#fold-cost).
  rng = np.random.default_rng(9)
  target = rng.integers(0, slots + 1, n).astype(I32)
  order = np.argsort(target, kind="stable").astype(I32)
  sort = functools.partial(_sort.sort_by_target, slots=slots)
  for form, fn in (("eager", sort), ("jit", jax.jit(sort))):
    got_target, got_order = fn(target)
    assert_same(got_order, order, form)
    assert_same(got_target, target[order], form)
  both = np.stack([target, target[::-1]])
  got_target, got_order = jax.vmap(sort)(both)
  assert_same(got_order[1], np.argsort(target[::-1], kind="stable").astype(I32))
  assert_same(got_target[1], np.sort(target)[::-1][::-1])
  hlo = jax.jit(sort).lower(target).as_text()
  key = "i64" if n > 1000 else "i32"
  # One single-operand sort of packed keys.
  assert hlo.count('"stablehlo.sort"') == 1, hlo
  assert f"}}) : (tensor<{n}x{key}>) -> tensor<{n}x{key}>" in hlo, hlo


def test_the_fold_skips_the_sort_of_ascending_targets():
  # From PRESORTED_TEST_MIN updates on, ascending targets (dropped ones, the
  # value `slots`, last) are their own stable sort: one adjacent compare and
  # a `lax.cond`, which under vmap stays a cond (the sort for the whole
  # batch when any member is out of order).
  n, slots = _sort.PRESORTED_TEST_MIN, 300
  rng = np.random.default_rng(11)
  ascending = np.sort(rng.integers(0, slots + 1, n)).astype(I32)
  shuffled = rng.permutation(ascending)
  sort = jax.jit(functools.partial(_sort.sort_by_target, slots=slots))
  for target in (ascending, shuffled):
    got_target, got_order = sort(target)
    order = np.argsort(target, kind="stable").astype(I32)
    assert_same(got_order, order)
    assert_same(got_target, target[order])
  for batch in ([ascending, ascending], [ascending, shuffled]):
    got_target, got_order = jax.vmap(sort)(np.stack(batch))
    for member, target, order in zip(batch, got_target, got_order):
      assert_same(order, np.argsort(member, kind="stable").astype(I32))
      assert_same(target, np.sort(member))
  batched = jax.make_jaxpr(jax.vmap(sort))(np.stack([ascending] * 2))
  assert "cond[" in str(batched) and "select_n" not in str(batched)
  small = functools.partial(_sort.sort_by_target, slots=slots)
  assert "cond[" not in str(jax.make_jaxpr(small)(ascending[: n - 1]))


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("reduction", ("sum", "prod", "mean"))
@pytest.mark.usefixtures("constructed")
@pytest.mark.covering_modes
def test_ascending_indices_fold_as_sorted_ones(reduction, monkeypatch):
  # The fold over ascending indices, with the sort skipped, gives the bits of
  # the serial reference, and its gradients the bits of the sorted path.
  n, slots = _sort.PRESORTED_TEST_MIN, 300
  rng = np.random.default_rng(12)
  indices = np.sort(rng.integers(0, slots + 4, n)).astype(I32)  # 4 dropped
  data = rng.uniform(-2, 2, slots).astype(F32)
  updates = rng.uniform(0.9, 1.1, n).astype(F32)
  weights = rng.uniform(-1, 1, slots).astype(F32)

  def run():
    def f(d, i, u):
      return jaxops.scatter_elements_update(
        d, i, u, 0, reduction=reduction, mode="drop"
      )

    grad = jax.grad(lambda d, i, u: jnp.sum(f(d, i, u) * weights), (0, 2))
    args = (data, indices, updates)  # traced indices: mode drops 300..303
    return jax.jit(f)(*args), jax.jit(grad)(*args)

  out, grads = run()
  expected = np_scatter_elements(data, indices, updates, 0, reduction)
  assert_same(out, expected)
  monkeypatch.setattr(_sort, "PRESORTED_TEST_MIN", n + 1)
  sorted_out, sorted_grads = run()
  assert_same(out, sorted_out)
  for got, want in zip(grads, sorted_grads):
    assert_same(got, want)


@pytest.mark.usefixtures("rows_at_any_size")
@pytest.mark.usefixtures("constructed")
def test_the_graph_layer_compiles_one_loop_per_test(monkeypatch):
  # Each test over the indices (shared rows, ascending targets, the fold's
  # longest run) is one variadic reduce, which XLA:CPU leaves whole; a plain
  # reduce of more than 32 elements becomes a chain of reduce-window kernels
  # (docs/design.md#one-pass-reductions). Only the row branch tests for
  # ascending targets: the element branch sorts.
  monkeypatch.setattr(_sort, "PRESORTED_TEST_MIN", 0)
  rng = np.random.default_rng(14)
  row = rng.integers(0, 50, 200).astype(I32)
  indices = np.broadcast_to(row[:, None], (200, 8))
  data = np.zeros((50, 8), F32)
  updates = rng.standard_normal((200, 8)).astype(F32)
  layer = lambda d, i, u: jaxops.scatter_elements_update(
    d, i, u, 0, reduction="sum"
  )
  grad = jax.grad(lambda d, i, u: jnp.sum(layer(d, i, u) ** 2), (0, 2))
  args = (data, indices, updates)  # traced indices: nothing folds
  for fn in (layer, grad):
    hlo = jax.jit(fn).lower(*args).compile().as_text()
    assert "reduce-window(" not in hlo, hlo
  assert str(jax.make_jaxpr(layer)(*args)).count("cond[") == 2
  assert_same(layer(*args), np_scatter_elements(*args, 0, "sum"))


@pytest.mark.parametrize("reduction", ("none", "sum", "max"))
@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
def test_the_serial_path_scatters_shared_indices_by_rows(reduction):
  # On CPU (XLA's serial scatter) the row test picks one scatter of the m
  # rows, beside the elements' scatter of its other branch (for `none`, the
  # last update of a row wins in each of its elements).
  rng = np.random.default_rng(15)
  row = rng.integers(0, 50, 200).astype(I32)
  indices = np.broadcast_to(row[:, None], (200, 8))
  data = np.zeros((50, 8), F32)
  updates = rng.standard_normal((200, 8)).astype(F32)
  layer = jax.jit(
    functools.partial(jaxops.scatter_elements_update, reduction=reduction)
  )
  hlo = layer.lower(data, indices, updates).compile().as_text()
  scattered = re.findall(r"= (\S+) scatter\(", hlo)
  assert sorted(scattered) == ["f32[400,1]{1,0}", "f32[50,8]{1,0}"], hlo
  assert_same(
    layer(data, indices, updates),
    np_scatter_elements(data, indices, updates, 0, reduction),
  )


@pytest.mark.jax_modes("x32")  # One mode, both paths.
@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
@pytest.mark.scatter_orders
def test_differentiated_none_by_rows_keeps_the_targets_where_they_are_cheap(
  scatter_order,
):
  # Differentiated, the row test's cond carries each branch's residuals out
  # of the forward: 4 bytes per element for the elements' targets. On CPU
  # the transpose tests the indices again instead (no conditional carries
  # an int per element); the constructed path keeps the residuals, whose
  # transpose would search the winners again.
  rng = np.random.default_rng(16)
  row = rng.integers(0, 50, 200).astype(I32)
  indices = np.broadcast_to(row[:, None], (200, 8)).copy()
  data = rng.standard_normal((50, 8)).astype(F32)
  updates = rng.standard_normal((200, 8)).astype(F32)
  weights = rng.standard_normal((50, 8)).astype(F32)

  def loss(d, i, u):
    return jnp.sum(jaxops.scatter_elements_update(d, i, u) * weights)

  grad = jax.jit(jax.grad(loss, (0, 2)))
  hlo = grad.lower(data, indices, updates).compile().as_text()
  carried = re.findall(r"= \(([^)]*)\) conditional\(", hlo)
  assert carried, hlo
  per_element = any(
    re.search(r"[su]\d+\[1600\]", outputs) for outputs in carried
  )
  assert per_element == (scatter_order == "constructed"), carried
  grads = grad(data, indices, updates)
  last = {t: p for p, t in enumerate(row)}
  won = np.array([last[t] == p for p, t in enumerate(row)])
  assert_same(grads[1], np.where(won[:, None], weights[row], 0).astype(F32))
  untouched = ~np.isin(np.arange(50), row)[:, None]
  assert_same(grads[0], np.where(untouched, weights, 0).astype(F32))


@pytest.mark.jax_modes("x32")  # One mode, both paths.
@pytest.mark.parametrize("layout", ("elements", "shared rows", "one off"))
@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
@pytest.mark.scatter_orders
def test_sum_without_init_backward_reads_the_forwards_targeted_mask(layout):
  # Its data cotangent is 0 at the targeted slots: the forward's mask of
  # them, a residual, where the backward scattered the targets again (an
  # int per update element). The backward is a gather and a select, by
  # rows where the indices are shared ("one off": all but one are, so the
  # row test takes the elements).
  rng = np.random.default_rng(17)
  row = rng.integers(-50, 50, 200).astype(I32)
  if layout == "elements":
    data = rng.standard_normal((50,)).astype(F32)
    indices = row
  else:
    data = rng.standard_normal((50, 8)).astype(F32)
    indices = np.broadcast_to(row[:, None], (200, 8)).copy()
    if layout == "one off":
      indices[7, 3] = (indices[7, 3] + 1) % 50
  updates = rng.standard_normal(indices.shape).astype(F32)
  ct = rng.standard_normal(data.shape).astype(F32)
  forward = jax.jit(
    lambda d, u: jax.vjp(
      lambda d, u: jaxops.scatter_elements_update(
        d, indices, u, reduction="sum", use_init_val=False
      ),
      d,
      u,
    )
  )
  out, backward = forward(data, updates)
  # The residuals as arguments: closed over, XLA would fold them.
  compiled = jax.jit(lambda b, c: b(c)).lower(backward, ct).compile()
  assert " scatter(" not in compiled.as_text(), compiled.as_text()
  assert_same(out, np_scatter_elements(data, indices, updates, 0, "sum", False))
  ct_data, ct_updates = compiled(backward, ct)
  columns = np.arange(data.size // 50)
  target = (indices % 50) * columns.size + columns
  targeted = np.isin(np.arange(data.size), target).reshape(data.shape)
  assert_same(ct_data, np.where(targeted, 0, ct).astype(F32))
  assert_same(ct_updates, ct.reshape(-1)[target])


def test_the_fold_sorts_stably_when_no_packed_key_fits():
  # A slot count past 2**62 leaves no room for the position bits in 63:
  # the stable two-operand sort instead.
  rng = np.random.default_rng(10)
  target = rng.integers(0, 6, 40).astype(I32)
  sort = jax.jit(functools.partial(_sort.sort_by_target, slots=2**62))
  got_target, got_order = sort(target)
  order = np.argsort(target, kind="stable").astype(I32)
  assert_same(got_order, order)
  assert_same(got_target, target[order])
  hlo = sort.lower(target).as_text()
  assert hlo.count('"stablehlo.sort"') == 1, hlo
  assert "(tensor<40xi32>, tensor<40xi32>) -> (tensor<40xi32>" in hlo, hlo


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize(
  "varies", (False, True), ids=("all-shared", "one-varies")
)
@pytest.mark.parametrize("reduction", ("none", "mean"))
@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
@pytest.mark.scatter_orders
def test_shared_indices_under_vmap(varies, reduction):
  # The branch is chosen once for the batch: by rows only when every
  # member's indices are shared.
  rng = np.random.default_rng(7)
  members = [_shared_case(rng, (5, 4), 0, F32, "drop", m=9) for _ in range(3)]
  data, indices, updates = (np.stack(x) for x in zip(*members))
  if varies:
    indices[1, 0, 2] = (indices[1, 0, 2] + 1) % 5
  fn = functools.partial(jaxops.scatter_elements_update, reduction=reduction)
  out = jax.vmap(fn)(data, indices, updates)
  for j in range(3):
    expected = np_scatter_elements(
      data[j], indices[j], updates[j], 0, reduction
    )
    assert_same(out[j], expected, str(j))


@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
@pytest.mark.scatter_orders
def test_shared_indices_checkify_names_the_axis():
  data = np.zeros((2, 3), F32)
  indices = np.array([[0, 0], [5, 5], [1, 1]])
  fn = functools.partial(
    jaxops.scatter_elements_update, axis=1, reduction="sum"
  )
  err, out = checkify.checkify(jax.jit(fn), errors=checkify.user_checks)(
    data, indices.T.copy(), np.ones((2, 3), F32)
  )
  with pytest.raises(
    checkify.JaxRuntimeError, match="out of range for axis 1 of size 3"
  ):
    err.throw()
  assert_same(
    out, np_scatter_elements(data, indices.T, np.ones((2, 3), F32), 1, "sum")
  )


# --- vmap


# Every reduction with all three arguments batched, and the other argument
# combinations spread over the reductions so that each engine path (the
# fold's batching rule, the combiner scatter, the unique write) meets
# several.
VMAP_AXES = {
  "none": [(0, None, None), (0, 0, 0)],
  "sum": [(None, 0, None), (0, 0, 0)],
  "prod": [(None, None, 0), (0, 0, 0)],
  "min": [(None, 0, 0), (0, 0, 0)],
  "max": [(0, 0, 0)],
  "mean": [(0, None, None), (0, None, 0), (0, 0, 0)],
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize(
  "reduction, axes",
  [(r, a) for r in REDUCTIONS for a in VMAP_AXES[r]],
)
@pytest.mark.covering_modes
def test_vmap_any_argument(reduction, axes):
  rng = np.random.default_rng(3)
  b = 3
  data = rng.standard_normal((b, 4, 2)).astype(F32)
  indices = rng.integers(-4, 4, (b, 6, 2))
  updates = rng.standard_normal((b, 6, 2)).astype(F32)
  args = [
    x if a is not None else x[0] for x, a in zip((data, indices, updates), axes)
  ]
  fn = functools.partial(jaxops.scatter_elements_update, reduction=reduction)
  out = jax.vmap(fn, axes)(*args)
  for j in range(b):
    one = [x[j] if a is not None else x for x, a in zip(args, axes)]
    assert_same(out[j], np_scatter_elements(*one, 0, reduction), str(j))


# --- derivatives


@pytest.mark.exhaustive
@pytest.mark.jax_modes("x64")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("init", (True, False))
def test_check_grads(reduction, init):
  rng = np.random.default_rng(4)
  data = rng.standard_normal((4, 3))
  indices = rng.integers(-4, 4, (9, 3))
  updates = rng.standard_normal((9, 3))
  updates[0, 0] = 0.0  # prod is exact with zeros present
  data[1, 1] = 0.0

  def fn(d, u):
    return jaxops.scatter_elements_update(
      d, indices, u, reduction=reduction, use_init_val=init
    )

  smooth = reduction in ("sum", "prod", "mean", "none")
  # Jitted: each numerical and AD evaluation reuses one compilation.
  check_grads(
    jax.jit(fn),
    (data, updates),
    order=2 if smooth else 1,
    modes=("fwd", "rev"),
  )


@pytest.mark.jax_modes("x64")
@pytest.mark.parametrize(
  "reduction",
  # Slow to compile (10 s for sum); their rules are checked by
  # test_check_grads, their shared-index fold by the value tests.
  ("none", "sum", "prod", "mean"),
)
@pytest.mark.exhaustive
@pytest.mark.usefixtures("rows_at_any_size", "scatter_order")
@pytest.mark.scatter_orders(one=True)
def test_check_grads_shared_indices(reduction):
  # The fold by rows (indices shared along the other dims).
  rng = np.random.default_rng(8)
  _, indices, _ = _shared_case(rng, (4, 3), 0, np.float64, "drop", 9)
  # Values of order one: products of the generator's larger values overflow
  # the finite differences' tolerance.
  data = rng.standard_normal((4, 3))
  updates = rng.standard_normal((9, 3))
  updates[0, 0] = 0.0

  def fn(d, u):
    return jaxops.scatter_elements_update(d, indices, u, reduction=reduction)

  check_grads(jax.jit(fn), (data, updates), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("reduction", ("sum", "mean"))
def test_eager_backward_takes_a_numpy_cotangent(reduction):
  # Found in the field: the float sum's own transpose (a gather) failed on
  # the NumPy cotangent of an eager vjp (`.at` of a NumPy array).
  data = np.arange(6, dtype=np.float32).reshape(2, 3)
  indices = np.array([[1, 0, 1], [1, -2, 0]])
  updates = np.ones((2, 3), np.float32)
  _, backward = jax.vjp(
    lambda d, u: jaxops.scatter_elements_update(
      d, indices, u, reduction=reduction
    ),
    data,
    updates,
  )
  ct = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
  for got, want in zip(backward(ct), jax.jit(backward)(ct)):
    assert_same(got, np.asarray(want))
  if reduction == "sum":
    assert_same(backward(ct)[1], ct[indices, [0, 1, 2]])


@pytest.mark.jax_modes("x64")
def test_prod_gradient_with_two_zeros_and_repeats():
  data = np.array([2.0, 5.0])
  updates = np.array([0.0, 3.0, 0.0, 4.0])
  indices = np.array([0, 0, 0, 1])
  grad = jax.grad(
    lambda d, u: jaxops.scatter_elements_update(
      d, indices, u, reduction="prod"
    ).sum(),
    argnums=(0, 1),
  )(data, updates)
  # Two zeros in slot 0: every partial derivative there is 0.
  assert_same(grad[0], np.array([0.0, 4.0]))
  assert_same(grad[1], np.array([0.0, 0.0, 0.0, 5.0]))
  updates = np.array([0.0, 3.0, 1.0, 4.0])
  grad = jax.grad(
    lambda u: jaxops.scatter_elements_update(
      data, indices, u, reduction="prod"
    ).sum()
  )(updates)
  assert_same(grad, np.array([6.0, 0.0, 0.0, 5.0]))


@pytest.mark.jax_modes("x64")
@pytest.mark.parametrize("reduction", ("min", "max"))
def test_min_max_tie_rule_data_then_first_update(reduction):
  data = np.array([1.0, 0.0])
  updates = np.array([1.0, 3.0, 3.0, -3.0, -3.0])
  indices = np.array([0, 1, 1, 1, 1])

  def fn(d, u):
    return jaxops.scatter_elements_update(d, indices, u, reduction=reduction)

  g_data, g_upd = jax.grad(lambda d, u: fn(d, u).sum(), (0, 1))(data, updates)
  winner = 1 if reduction == "max" else 3
  expected = np.zeros(5)
  expected[winner] = 1.0
  assert_same(g_data, np.array([1.0, 0.0]))  # data wins its tie in slot 0
  assert_same(g_upd, expected)
  _, tangent = jax.jvp(fn, (data, updates), (np.ones(2), np.arange(5.0)))
  assert_same(tangent, np.array([1.0, float(winner)]))
