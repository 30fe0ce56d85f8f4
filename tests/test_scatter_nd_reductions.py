"""ScatterNDUpdate-15 reductions (`jaxops.scatter_nd_update(reduction=)`).

The engine is shared with ScatterElementsUpdate-12 and tested in depth there
(tests/test_scatter_elements_update.py); here: the ND views (slices, k = 0,
k = rank), the spec's examples as corrected (SNU-5), bool sub, derivatives,
vmap, and the index paths shared with ScatterNDUpdate-3.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jax.test_util import check_grads

import jaxops
from tests.support import generators as gen
from tests.support import modes, rejections
from tests.support.asserts import assert_same, assert_same_bits
from tests.support.reductions import nan_bits_case, np_scatter_nd_reduce

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# A call with a reduction names the version it implements in its errors.
OP = "ScatterNDUpdate-15"
ND = ("sum", "sub", "prod", "min", "max")
F32, I32 = np.float32, np.int32

# The example of ScatterNDUpdate-15 (data [1, 2, 3, 4], indices [0, 2, -3,
# -3, 0], updates [10..50]) with the values the formula gives (SNU-5).
SPEC = {
  "none": [50, 40, 20, 4],
  "sum": [61, 72, 23, 4],
  "sub": [-59, -68, -17, 4],
  "prod": [500, 2400, 60, 4],
  "min": [1, 2, 3, 4],
  "max": [50, 40, 20, 4],
}


@pytest.mark.parametrize("reduction", SPEC)
def test_spec_example_corrected(reduction):
  data = np.array([1, 2, 3, 4], I32)
  indices = np.array([[0], [2], [-3], [-3], [0]], I32)
  updates = np.array([10, 20, 30, 40, 50], I32)
  out = jaxops.scatter_nd_update(data, indices, updates, reduction=reduction)
  assert_same(out, np.array(SPEC[reduction], I32))
  if reduction != "none":
    assert_same(out, np_scatter_nd_reduce(data, indices, updates, reduction))


def test_bool_sub_is_xor():
  data = np.array([True, False, True])
  indices = np.array([[0], [0], [1], [2]])
  updates = np.array([True, True, True, False])
  out = jaxops.scatter_nd_update(data, indices, updates, reduction="sub")
  assert_same(out, np.array([True, True, True]))


def test_bad_reduction():
  rejections.assert_op_error(
    OP,
    ValueError,
    r"^reduction='mean' must be one of",
    lambda: jaxops.scatter_nd_update(
      np.zeros(3, F32), [[0]], np.ones(1, F32), reduction="mean"
    ),
  )


# min/max keep the bits of a slot whose result is data's own element: one
# no tuple reaches, or one where data wins (a NaN with its payload); a NaN
# from an update is the canonical NaN. Slots nothing targets came back as
# the canonical NaN before (payload and sign lost).
@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("run", modes.RUNS)
@pytest.mark.parametrize(
  "dtype",
  (
    np.float16,
    jnp.bfloat16,
    F32,
    pytest.param(np.float64, marks=pytest.mark.jax_modes("x64")),
  ),
  ids=gen.dtype_id,
)
@pytest.mark.parametrize("reduction", ("min", "max"))
@pytest.mark.scatter_orders(one=True)
def test_min_max_keep_the_bits_of_data_they_keep(
  reduction, dtype, run, scatter_order
):
  data, targets, updates, expected = nan_bits_case(dtype, reduction)
  out = modes.run_as(
    run,
    lambda d, u: jaxops.scatter_nd_update(
      d, targets[:, None], u, reduction=reduction
    ),
    data,
    updates,
  )
  assert_same_bits(out, expected)


_jitted = jax.jit(jaxops.scatter_nd_update, static_argnames="reduction")


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("reduction", ND)
@pytest.mark.parametrize(
  "dtype", (F32, np.float16, I32, np.uint8), ids=gen.dtype_id
)
@pytest.mark.covering_modes
def test_slices_and_elements_match_serial_reference(reduction, dtype):
  rng = np.random.default_rng(ND.index(reduction))
  for data_shape, lead, k in [
    ((4, 3), (7,), 1),
    ((3, 2, 2), (2, 5), 2),
    ((3, 2), (4,), 0),
  ]:
    data = gen.random_values(rng, data_shape, dtype)
    indices = rng.integers(-2, 2, lead + (k,))
    updates = gen.random_values(rng, lead + data_shape[k:], dtype)
    expected = np_scatter_nd_reduce(data, indices, updates, reduction)
    # Eager for the first form, jitted for the others: each form is a
    # compilation, and eager == jit is the field-config tests' matter.
    fn = jaxops.scatter_nd_update if k == 1 else _jitted
    assert_same(
      fn(data, indices, updates, reduction=reduction),
      expected,
      f"{data_shape} k={k}",
    )


@pytest.mark.parametrize("mode", ("drop", "clip"))
def test_out_of_range_tuples(mode):
  data = np.arange(6, dtype=F32).reshape(3, 2)
  indices = np.array([[5], [-1], [-9], [1]], I32)
  updates = np.full((4, 2), 10, F32)
  fn = jax.jit(
    functools.partial(jaxops.scatter_nd_update, reduction="sum", mode=mode)
  )
  assert_same(
    fn(data, indices, updates),
    np_scatter_nd_reduce(data, indices, updates, "sum", mode=mode),
  )


@pytest.mark.parametrize("reduction", ("none", "sum"))
def test_x32_clip_does_not_wrap_values_beyond_int32(reduction):
  # 2**32 + 1 clamps to the last index, as in x64 mode (it used to wrap to 1
  # in x32 mode). Failing before: out[1, 1] was written.
  out = jaxops.scatter_nd_update(
    np.zeros((2, 3), F32),
    np.array([[1, 2**32 + 1]], np.int64),
    np.array([7.0], F32),
    reduction=reduction,
    mode="clip",
  )
  expected = np.zeros((2, 3), F32)
  expected[1, 2] = 7.0
  assert_same(out, expected)


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("run", range(1, 6))
@pytest.mark.parametrize("reduction", ("sum", "prod"))
@pytest.mark.usefixtures("constructed")
@pytest.mark.covering_modes
def test_constant_arguments_fold_every_update(reduction, run):
  # Constants of the jitted function, so that XLA evaluates the fold's loop
  # while compiling. With its counter stepping by two ranks, XLA:CPU
  # (jaxlib 0.10.2) dropped the loop for a run of one update: out[1] was 2.
  data = np.arange(1, 4, dtype=F32)
  indices = np.ones((run, 1), I32)
  updates = np.arange(2, 2 + run, dtype=F32)
  out = jax.jit(
    lambda: jaxops.scatter_nd_update(
      data, indices, updates, reduction=reduction
    )
  )()
  assert_same(out, np_scatter_nd_reduce(data, indices, updates, reduction))


def test_python_int_updates_that_do_not_fit():
  rejections.assert_op_error(
    OP,
    ValueError,
    r"^updates value 2048 does not fit data dtype int8",
    lambda: jaxops.scatter_nd_update(
      np.zeros(3, np.int8), [[0]], [2048], reduction="sum"
    ),
  )


def test_out_of_range_errors_name_the_version():
  # Eagerly an IndexError, under jit checkify's user check; both said
  # ScatterNDUpdate-3 before.
  data, updates = np.zeros(4, F32), np.ones(2, F32)
  rejections.assert_op_error(
    OP,
    IndexError,
    r"^indices\[1, 0\]=4 is out of range for a dim of size 4",
    lambda: jaxops.scatter_nd_update(
      data, np.array([[1], [4]]), updates, reduction="max"
    ),
  )
  checked = checkify.checkify(
    jax.jit(functools.partial(jaxops.scatter_nd_update, reduction="max")),
    errors=checkify.user_checks,
  )
  err, _ = checked(data, np.array([[1], [4]]), updates)
  assert err.get().startswith(f"{OP}: an index tuple is out of range"), (
    err.get()
  )


# Every reduction with all three arguments batched, and the other argument
# combinations spread over the reductions so that each engine path (the
# fold's batching rule, the combiner scatter, the unique write) meets
# several.
VMAP_AXES = {
  "sum": [(0, None, None), (0, 0, 0)],
  "sub": [(None, 0, None), (0, 0, 0)],
  "prod": [(None, None, 0), (0, 0, 0)],
  "min": [(None, 0, 0), (0, 0, 0)],
  "max": [(0, None, 0), (0, 0, 0)],
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize(
  "reduction, axes", [(r, a) for r in ND for a in VMAP_AXES[r]]
)
@pytest.mark.covering_modes
def test_vmap_any_argument(reduction, axes):
  rng = np.random.default_rng(5)
  data = rng.standard_normal((2, 3, 2)).astype(F32)
  indices = rng.integers(0, 3, (2, 5, 1))
  updates = rng.standard_normal((2, 5, 2)).astype(F32)
  args = [
    x if a is not None else x[0] for x, a in zip((data, indices, updates), axes)
  ]
  fn = functools.partial(jaxops.scatter_nd_update, reduction=reduction)
  out = jax.vmap(fn, axes)(*args)
  for j in range(2):
    one = [x[j] if a is not None else x for x, a in zip(args, axes)]
    assert_same(out[j], np_scatter_nd_reduce(*one, reduction), str(j))


@pytest.mark.exhaustive
@pytest.mark.jax_modes("x64")
@pytest.mark.parametrize("reduction", ND)
@pytest.mark.scatter_orders
def test_check_grads(reduction, scatter_order):
  rng = np.random.default_rng(6)
  data = rng.standard_normal((3, 4))
  indices = rng.integers(0, 3, (7, 1))
  updates = rng.standard_normal((7, 4))
  updates[2, 1] = 0.0

  def fn(d, u):
    return jaxops.scatter_nd_update(d, indices, u, reduction=reduction)

  smooth = reduction in ("sum", "sub", "prod")
  # Jitted: each numerical and AD evaluation reuses one compilation.
  check_grads(
    jax.jit(fn),
    (data, updates),
    order=2 if smooth else 1,
    modes=("fwd", "rev"),
  )


@pytest.mark.parametrize("reduction", ("sum", "sub"))
def test_float_sum_backward_is_a_gather(reduction):
  """The reverse pass of a float sum or sub is each update's target row of
  the cotangent: no fold, sort or scatter (docs/design.md#shared-indices)."""
  rng = np.random.default_rng(7)
  data = rng.standard_normal((4, 3)).astype(F32)
  indices = np.array([[1], [3], [1], [2], [-4]])  # slot 1 twice
  updates = rng.standard_normal((5, 3)).astype(F32)
  fn = functools.partial(
    jaxops.scatter_nd_update, indices=indices, reduction=reduction
  )
  _, backward = jax.vjp(lambda d, u: fn(d, updates=u), data, updates)
  ct = rng.standard_normal((4, 3)).astype(F32)
  text = str(jax.make_jaxpr(backward)(ct))
  assert not any(p in text for p in ("while", "sort", "scatter")), text
  ct_data, ct_updates = backward(ct)
  sign = 1 if reduction == "sum" else -1
  assert_same(ct_data, ct)
  assert_same(ct_updates, sign * ct[[1, 3, 1, 2, 0]])
