"""The transformation matrix: every operator row under jit, vmap, grad, jvp,
jacfwd/jacrev, hessian and grad-of-vmap.

Each row is a `Case`: a function of array arguments (static attributes closed
over), a seeded generator of valid arguments, and which arguments are
differentiable. A new operator joins the matrix by adding rows to `CASES`;
the derivative tests (`DERIVATIVE_TESTS`: check_grads, and eager backward
passes on NumPy cotangents) also run over `MODE_CASES`, a row for every
mode and reduction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxops
from tests.support import generators as gen
from tests.support.asserts import assert_same
from tests.support.strided_slice import every_mask


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  fn: Callable[..., jax.Array]
  make_args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
  diff_argnums: tuple[int, ...]
  # Jointly linear in the differentiable arguments (every row but prod).
  linear: bool = True

  def args(self, seed: int = 0) -> tuple[np.ndarray, ...]:
    return self.make_args(np.random.default_rng(seed))


def _floats(rng, shape):
  # NumPy float64: float32 once JAX canonicalizes it in the x32 runs.
  return rng.standard_normal(shape)


def _gather_nd_case(name, data_shape, lead_shape, k, batch_dims, **attrs):
  b = batch_dims

  def make_args(rng):
    idx = gen.random_indices(
      rng, data_shape[b : b + k], data_shape[:b] + lead_shape
    )
    return _floats(rng, data_shape), idx

  return Case(
    f"gather_nd_{name}",
    lambda d, i: jaxops.gather_nd(d, i, batch_dims=b, **attrs),
    make_args,
    (0,),
  )


def _gather_elements_case(name, data_shape, indices_shape, axis, **attrs):

  def make_args(rng):
    s = data_shape[axis]
    return _floats(rng, data_shape), gen.random_indices(rng, s, indices_shape)

  return Case(
    f"gather_elements_{name}",
    lambda d, i: jaxops.gather_elements(d, i, axis=axis, **attrs),
    make_args,
    (0,),
  )


def _scatter_nd_update_case(name, data_shape, lead_shape, k, unique, **attrs):
  sizes = data_shape[:k]

  def make_args(rng):
    idx = gen.random_indices(rng, sizes, lead_shape, unique=unique)
    return (
      _floats(rng, data_shape),
      idx,
      _floats(rng, tuple(lead_shape) + tuple(data_shape[k:])),
    )

  return Case(
    f"scatter_nd_update_{name}",
    lambda d, i, u: jaxops.scatter_nd_update(d, i, u, **attrs),
    make_args,
    (0, 2),
  )


def _scatter_reduction_case(name, op, reduction, targets="repeated", **attrs):
  """Smooth reductions of (3, 4) data: with `targets` "repeated" six
  updates into three rows (ScatterND) or six into four columns
  (ScatterElements, axis 1), "unique" one update per row or column."""
  if op == "nd":

    def fn(d, i, u):
      return jaxops.scatter_nd_update(d, i, u, reduction=reduction, **attrs)

    def make_args(rng):
      if targets == "unique":
        idx = rng.permutation(3)[:, None]
      else:
        idx = rng.integers(-3, 3, (6, 1))
      return _floats(rng, (3, 4)), idx, _floats(rng, (len(idx), 4))
  else:

    def fn(d, i, u):
      return jaxops.scatter_elements_update(
        d, i, u, 1, reduction=reduction, **attrs
      )

    def make_args(rng):
      if targets == "unique":
        idx = np.stack([rng.permutation(4)[:3] for _ in range(3)])
      else:
        idx = rng.integers(-4, 4, (3, 6))
      return _floats(rng, (3, 4)), idx, _floats(rng, idx.shape)

  return Case(
    f"scatter_{op}_{name}",
    fn,
    make_args,
    (0, 2),
    linear=reduction not in ("prod", "min", "max"),
  )


def _strided_slice_case(name, data_shape, begin, end, strides, **masks):
  return Case(
    f"strided_slice_{name}",
    lambda d: jaxops.strided_slice(d, begin, end, strides, **masks),
    lambda rng: (_floats(rng, data_shape),),
    (0,),
  )


def _strided_slice_spec_case(name, spec):
  return _strided_slice_case(
    name, spec.data_shape, spec.begin, spec.end, **spec.kwargs()
  )


def _gather_case(
  name, data_shape, indices_shape, axis, batch_dims, out_of_range=True, **attrs
):

  def make_args(rng):
    s = data_shape[axis]
    if out_of_range:
      # About half out of range: zeros with a zero derivative.
      idx = gen.half_out_of_range(rng, s, indices_shape)
    else:
      idx = gen.random_indices(rng, s, indices_shape)
    return _floats(rng, data_shape), idx

  return Case(
    f"gather_{name}",
    lambda d, i: jaxops.gather(d, i, axis, batch_dims, **attrs),
    make_args,
    (0,),
  )


def _slice_case(name, data_shape, start, stop, step, axes=None):
  return Case(
    f"slice_{name}",
    lambda d: jaxops.slice(d, start, stop, step, axes),
    lambda rng: (_floats(rng, data_shape),),
    (0,),
  )


CASES = [
  _gather_nd_case("elements", (4, 5), (3,), k=2, batch_dims=0),
  _gather_nd_case("slices", (4, 5, 3), (2, 2), k=1, batch_dims=0),
  _gather_nd_case("batch1", (3, 4, 5), (2,), k=1, batch_dims=1),
  _gather_nd_case("batch2_k0", (2, 3, 4), (2,), k=0, batch_dims=2),
  _gather_elements_case("axis0", (4, 3), (5, 3), axis=0),
  _gather_case("axis1", (4, 5, 2), (3, 2), axis=1, batch_dims=0),
  _gather_case("batch1_axis2", (3, 2, 4), (3, 5), axis=2, batch_dims=1),
  _gather_elements_case("axis_last_smaller", (3, 4, 5), (2, 4, 6), axis=-1),
  _scatter_nd_update_case("elements", (4, 5), (3,), k=2, unique=True),
  _scatter_nd_update_case("slices", (5, 3, 2), (2, 2), k=1, unique=True),
  _scatter_nd_update_case("duplicates", (3, 4), (6,), k=1, unique=False),
  _slice_case("reverse_clamp", (5, 4, 3), (-9, 3), (-99, 0), (-2, 1), (0, 2)),
  _slice_case("int64_limits", (4, 6), (2**63 - 1,), (-(2**63),), (-1,), (-1,)),
  # The reductions share one engine: its fold (sum) and its exact prod
  # rule, one row per operator (mean, min/max: their own test files).
  _scatter_reduction_case("sum", "nd", "sum"),
  _scatter_reduction_case("prod", "elements", "prod"),
  _strided_slice_case(
    "masks_reverse",
    (5, 4, 3),
    (4, -1, 0),
    (0, 0, 3),
    (-2, -1, 1),
    begin_mask=(0, 0, 1),
    end_mask=(0, 1),
  ),
  _strided_slice_spec_case(
    "new_axis_shrink_ellipsis", every_mask((5, 4, 3), -1)
  ),
  _strided_slice_case(
    "reverse_clamp_bitfields",
    (4, 6),
    (-10, 5),
    (-20, 0),
    (-1, -2),
    new_axis_mask=0,
    end_mask=2,
  ),
]


# Every mode and every reduction of every operator with indices, for the
# derivative tests (`DERIVATIVE_TESTS`): each traces its own path, with its
# own transposes. Each reduction has a row with repeated targets (CASES has
# ScatterND's sum and ScatterElements' prod), each mode a row per operator,
# and each float reduction that `unique_indices=True` computes differently
# a row with it. Indices in range: concrete out-of-range indices raise,
# except in Gather-8's fill mode.
_UNIQUE = {"mode": "promise_in_bounds", "unique_indices": True}
_NO_INIT = {"use_init_val": False}
MODE_CASES = [
  _gather_case("fill_value", (4, 5), (3,), 0, 0, fill_value=2.0),
  _gather_case("clip", (4, 5), (3,), 1, 0, out_of_range=False, mode="clip"),
  _gather_case(
    "promise", (4, 5), (3,), 1, 0, out_of_range=False, mode="promise_in_bounds"
  ),
  _gather_nd_case("clip", (4, 5), (3,), 1, 0, mode="clip"),
  _gather_nd_case("promise", (4, 5), (3,), 2, 0, mode="promise_in_bounds"),
  _gather_elements_case("clip", (4, 3), (4, 5), 1, mode="clip"),
  _gather_elements_case("promise", (4, 3), (5, 3), 0, mode="promise_in_bounds"),
  _scatter_nd_update_case("clip", (4, 3), (6,), 1, False, mode="clip"),
  _scatter_nd_update_case("promise_unique", (4, 3), (3,), 1, True, **_UNIQUE),
  _scatter_reduction_case("sum_unique", "nd", "sum", "unique", **_UNIQUE),
  _scatter_reduction_case("sub_clip", "nd", "sub", mode="clip"),
  _scatter_reduction_case("sub_unique", "nd", "sub", "unique", **_UNIQUE),
  _scatter_reduction_case("prod_clip", "nd", "prod", mode="clip"),
  _scatter_reduction_case("prod_unique", "nd", "prod", "unique", **_UNIQUE),
  _scatter_reduction_case("min_clip", "nd", "min", mode="clip"),
  _scatter_reduction_case("max", "nd", "max"),
  _scatter_reduction_case("none_clip", "elements", "none", mode="clip"),
  _scatter_reduction_case(
    "none_unique", "elements", "none", "unique", **_UNIQUE
  ),
  _scatter_reduction_case(
    "sum_clip_no_init", "elements", "sum", mode="clip", **_NO_INIT
  ),
  _scatter_reduction_case("sum_unique", "elements", "sum", "unique", **_UNIQUE),
  _scatter_reduction_case(
    "prod_unique_no_init", "elements", "prod", "unique", **_UNIQUE, **_NO_INIT
  ),
  _scatter_reduction_case(
    "min_clip_no_init", "elements", "min", mode="clip", **_NO_INIT
  ),
  _scatter_reduction_case("max", "elements", "max"),
  _scatter_reduction_case(
    "mean_clip_no_init", "elements", "mean", mode="clip", **_NO_INIT
  ),
  _scatter_reduction_case(
    "mean_unique", "elements", "mean", "unique", **_UNIQUE
  ),
]

# The tests that run over MODE_CASES too.
DERIVATIVE_TESTS = (
  "test_check_grads_fwd_and_rev_order2",
  "test_eager_transposes_take_numpy_cotangents",
)


# Tests that hold only for linear rows; the others get their second
# derivatives from check_grads(order=2) and jacfwd == jacrev.
LINEAR_ONLY = (
  "test_hessian_matches_gauss_newton_identity",
  "test_jvp_is_op_of_tangent",
  "test_linear_transpose_is_the_vjp",
)


# One row per operator, marked `lowest_versions`: .ci/run runs them under
# every transformation, in both x64 modes, with every dependency at its
# lowest declared version too.
LOWEST_VERSIONS = (
  "gather_nd_batch1",
  "gather_elements_axis_last_smaller",
  "scatter_nd_update_duplicates",
  "scatter_nd_sum",
  "scatter_elements_prod",
  "strided_slice_new_axis_shrink_ellipsis",
  "gather_batch1_axis2",
  "slice_int64_limits",
)


def pytest_generate_tests(metafunc):
  if "case" in metafunc.fixturenames:
    cases = CASES
    if metafunc.function.__name__ in DERIVATIVE_TESTS:
      cases = CASES + MODE_CASES
    if metafunc.function.__name__ in LINEAR_ONLY:
      cases = [c for c in CASES if c.linear]
    metafunc.parametrize(
      "case",
      [
        pytest.param(
          c,
          id=c.name,
          marks=[pytest.mark.lowest_versions]
          if c.name in LOWEST_VERSIONS
          else [],
        )
        for c in cases
      ],
    )


BATCH = 3


def _batched_args(case, axis):
  """BATCH independent argument tuples, each stacked along `axis`."""
  per_seed = [case.args(seed) for seed in range(BATCH)]
  return per_seed, tuple(
    np.stack(arrays, axis=axis) for arrays in zip(*per_seed)
  )


def _loss(case):
  """A nonlinear scalar loss of the differentiable arguments."""

  def loss(*args):
    out = case.fn(*args)
    return jnp.sum(jnp.sin(out) * out)

  return loss


@pytest.mark.covering_modes
def test_jit_matches_eager(case):
  args = case.args()
  assert_same(jax.jit(case.fn)(*args), np.asarray(case.fn(*args)))


@pytest.mark.exhaustive(default=4)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.covering_modes
def test_vmap_all_args_matches_loop(case, axis):
  per_seed, stacked = _batched_args(case, axis)
  out = jax.vmap(case.fn, in_axes=axis, out_axes=axis)(*stacked)
  expected = np.stack([case.fn(*args) for args in per_seed], axis=axis)
  assert_same(out, expected)


@pytest.mark.exhaustive(default=2)
@pytest.mark.covering_modes
def test_vmap_each_arg_alone_matches_loop(case):
  fixed = case.args(seed=100)
  per_seed, stacked = _batched_args(case, axis=0)
  for argnum in range(len(fixed)):
    in_axes = [None] * len(fixed)
    in_axes[argnum] = 0
    args = list(fixed)
    args[argnum] = stacked[argnum]
    out = jax.vmap(case.fn, in_axes=tuple(in_axes))(*args)
    expected = []
    for seed_args in per_seed:
      loop_args = list(fixed)
      loop_args[argnum] = seed_args[argnum]
      expected.append(case.fn(*loop_args))
    assert_same(out, np.stack(expected), f"arg {argnum}")


def _of_diff_args(case, args):
  """`case.fn` as a function of its differentiable arguments alone."""

  def f(*diff_args):
    full = list(args)
    for i, a in zip(case.diff_argnums, diff_args):
      full[i] = a
    return case.fn(*full)

  return f


@pytest.mark.exhaustive(default=12, keep=("scatter_nd_sub_unique",))
@pytest.mark.jax_modes("x64")  # finite differences need float64
@pytest.mark.scatter_orders(one=True)
def test_check_grads_fwd_and_rev_order2(case, scatter_order):
  args = case.args()
  check_grads(
    jax.jit(_of_diff_args(case, args)),
    tuple(args[i] for i in case.diff_argnums),
    order=2,
    modes=["fwd", "rev"],
    atol=1e-6,
    rtol=1e-6,
  )


@pytest.mark.exhaustive(
  default=8,
  keep=("scatter_elements_sum_clip_no_init", "scatter_elements_sum_unique"),
)
@pytest.mark.jax_modes("x64")
@pytest.mark.scatter_orders(one=True)
def test_eager_transposes_take_numpy_cotangents(case, scatter_order):
  """Every transpose rule takes NumPy cotangents: an eager `jax.vjp`'s
  backward called on a NumPy array (as `check_grads` calls it), and
  `jax.linear_transpose` of that backward (transposes of transposes) called
  on NumPy arrays, give what they give under `jit`."""
  args = case.args()
  f = _of_diff_args(case, args)
  primals = tuple(args[i] for i in case.diff_argnums)
  rng = np.random.default_rng(3)
  ct = rng.standard_normal(np.shape(jax.eval_shape(f, *primals)))
  tangents = tuple(rng.standard_normal(p.shape) for p in primals)

  def derivatives(primals, ct, tangents):
    backward = jax.vjp(f, *primals)[1]
    return backward(ct), jax.linear_transpose(backward, ct)(tangents)[0]

  want = jax.jit(derivatives)(primals, ct, tangents)
  got = derivatives(primals, ct, tangents)
  for name, got_i, want_i in zip(("vjp", "transposed vjp"), got, want):
    for j, (g, w) in enumerate(zip(got_i, want_i)):
      assert_same(g, np.asarray(w), f"{name}, argument {j}")


@pytest.mark.exhaustive(default=6)
@pytest.mark.covering_modes
@pytest.mark.scatter_orders
def test_jacfwd_equals_jacrev(case, scatter_order):
  args = case.args()
  for i in case.diff_argnums:
    fwd = jax.jit(jax.jacfwd(case.fn, argnums=i))(*args)
    rev = jax.jit(jax.jacrev(case.fn, argnums=i))(*args)
    np.testing.assert_allclose(fwd, rev, atol=1e-12)


@pytest.mark.exhaustive(default=6)
@pytest.mark.covering_modes
@pytest.mark.scatter_orders
def test_hessian_matches_gauss_newton_identity(case, scatter_order):
  """For linear ops, the Hessian of sum(out**2) is 2 J^T J exactly."""
  args = case.args()
  for i in case.diff_argnums:

    def sq_loss(x, i=i):
      full = list(args)
      full[i] = x
      return jnp.sum(case.fn(*full) ** 2)

    x = args[i]
    jac = jax.jit(
      jax.jacrev(lambda x, i=i: case.fn(*args[:i], x, *args[i + 1 :]))
    )(x)
    jac = np.reshape(jac, (-1, x.size))
    hess = np.reshape(jax.jit(jax.hessian(sq_loss))(x), (x.size, x.size))
    np.testing.assert_allclose(hess, 2 * jac.T @ jac, atol=1e-10)


@pytest.mark.exhaustive(default=2)
@pytest.mark.covering_modes
def test_grad_over_all_args_gives_float0_for_indices(case):
  args = case.args()
  grads = jax.jit(
    jax.grad(_loss(case), argnums=tuple(range(len(args))), allow_int=True)
  )(*args)
  for i, (arg, g) in enumerate(zip(args, grads)):
    if i in case.diff_argnums:
      assert g.dtype == jax.dtypes.canonicalize_dtype(arg.dtype)
      assert g.shape == arg.shape
    else:
      assert g.dtype == jax.dtypes.float0, f"arg {i} got {g.dtype}"


@pytest.mark.exhaustive(default=4)
@pytest.mark.covering_modes
@pytest.mark.scatter_orders
def test_vmap_of_grad_matches_loop(case, scatter_order):
  per_seed, stacked = _batched_args(case, axis=0)
  grad = jax.grad(_loss(case), argnums=case.diff_argnums)
  out = jax.jit(jax.vmap(grad))(*stacked)
  grad = jax.jit(grad)
  for j, args in enumerate(per_seed):
    for got, want in zip(out, grad(*args)):
      tol = 1e-12 if got.dtype == np.float64 else 1e-5  # fused differently
      np.testing.assert_allclose(got[j], want, rtol=tol, atol=tol)


@pytest.mark.covering_modes
def test_jvp_is_op_of_tangent(case):
  """The ops are jointly linear in their differentiable args, so
  jvp(f, arg i)(x; t) = f with arg i = t and the other differentiable args 0."""
  args = case.args()
  rng = np.random.default_rng(7)
  for i in case.diff_argnums:
    tangent = rng.standard_normal(args[i].shape)
    primals_out, tangent_out = jax.jit(
      lambda x, t, i=i: jax.jvp(
        lambda x: case.fn(*args[:i], x, *args[i + 1 :]), (x,), (t,)
      )
    )(args[i], tangent)
    assert_same(primals_out, np.asarray(case.fn(*args)))
    linear_args = [
      np.zeros_like(a) if j in case.diff_argnums else a
      for j, a in enumerate(args)
    ]
    linear_args[i] = tangent
    np.testing.assert_allclose(tangent_out, case.fn(*linear_args), atol=1e-12)


@pytest.mark.exhaustive(
  default=4, keep=("gather_elements_axis0", "gather_elements_axis_last_smaller")
)
@pytest.mark.covering_modes
def test_linear_transpose_is_the_vjp(case):
  """`jax.linear_transpose` of a linear row in its differentiable args
  gives its vjp. It traces those args as unknown and every value computed
  from them as unknown too, so an index that merely follows data's batching
  (`_common.batched_like`) must stay known (it failed with an
  AssertionError in the transpose of a select)."""
  args = case.args()
  f = _of_diff_args(case, args)
  primals = tuple(args[i] for i in case.diff_argnums)
  out = jax.eval_shape(f, *primals)
  ct = np.random.default_rng(5).standard_normal(out.shape).astype(out.dtype)
  want = jax.vjp(f, *primals)[1](ct)
  got = jax.linear_transpose(f, *primals)(ct)
  for j, (g, w) in enumerate(zip(got, want)):
    assert_same(g, np.asarray(w), f"argument {j}")


def test_transposable_uses_its_own_transpose_under_every_transform():
  """`_transposable.transposable`: JAX never transposes `apply` itself (a
  deliberately different `transpose` shows which one ran), and vmap batches
  both functions."""
  from jaxops import _transposable

  scale = jnp.asarray([2.0, 3.0], jnp.float32)
  apply = lambda r, x: (x * r,)  # noqa: E731
  transpose = lambda r, ct: (ct * r + 1.0,)  # noqa: E731

  aval = jax.core.ShapedArray((2,), jnp.float32)

  def f(x):
    return _transposable.transposable(apply, transpose, scale, (x,), [aval])[0]

  x = jnp.asarray([5.0, 7.0], jnp.float32)
  ones = jnp.ones(2, jnp.float32)
  assert_same(f(x), np.asarray([10.0, 21.0], np.float32))
  assert_same(jax.jvp(f, (x,), (ones,))[1], np.asarray([2.0, 3.0], np.float32))
  (ct,) = jax.vjp(f, x)[1](ones)
  assert_same(ct, np.asarray([3.0, 4.0], np.float32))
  # Transposed twice: `apply` again.
  twice = jax.linear_transpose(
    lambda c: jax.vjp(f, x)[1](c)[0], jax.ShapeDtypeStruct((2,), jnp.float32)
  )
  assert_same(twice(ones)[0], np.asarray([2.0, 3.0], np.float32))
  batched = jax.vmap(lambda x: jax.vjp(f, x)[1](ones)[0])(jnp.stack([x, x]))
  assert_same(batched, np.asarray([[3.0, 4.0]] * 2, np.float32))
  assert_same(jax.jit(jax.vmap(f))(jnp.stack([x, x])), np.stack([f(x)] * 2))


def test_transposable_traces_apply_only_to_lower_it():
  """The primitive carries its output types: neither its abstract evaluation
  nor its jvp, transpose or batching rule traces `apply` (a scatter
  reduction's fold, a fifth of a second per trace). Reverse mode never
  evaluates `apply` at all; the forward traces it once, to lower it."""
  from jaxops import _transposable

  traced = []

  def apply(r, x):
    traced.append(None)
    return (x * r,)

  transpose = lambda r, ct: (ct * r,)  # noqa: E731
  scale = jnp.asarray([2.0, 3.0], jnp.float32)
  aval = jax.core.ShapedArray((2,), jnp.float32)

  def f(x):
    return _transposable.transposable(apply, transpose, scale, (x,), [aval])[0]

  x = jnp.asarray([5.0, 7.0], jnp.float32)
  jax.jit(jax.grad(lambda x: f(x).sum())).lower(x)
  jax.jit(jax.vmap(jax.grad(lambda x: f(x).sum()))).lower(jnp.stack([x, x]))
  assert traced == []
  jax.jit(f).lower(x)
  assert len(traced) == 1


def test_linear_with_transpose_traces_the_operator_once_under_grad():
  """`linear_with_transpose`'s tangent takes its type from the primal output:
  `jit(value_and_grad)` traces the operator once, for the primal."""
  from jaxops import _linear

  traced = []

  def fn(data, indices, updates):
    traced.append(None)
    return data.at[indices].add(updates)

  def transpose(indices, ct):
    return ct, ct[indices]

  def loss(data, updates):
    indices = jnp.asarray([0, 2], jnp.int32)
    out = _linear.linear_with_transpose(fn, transpose, data, indices, updates)
    return jnp.sum(out * out)

  data, updates = jnp.ones(3, jnp.float32), jnp.ones(2, jnp.float32)
  jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(data, updates)
  assert len(traced) == 1


# The gathers whose reads are rows of data (no batch dims, the indexed dims
# leading): their tangent reads one linear row per tuple, so that the
# transpose is a scatter-add XLA emits as it is (docs/design.md#row-transpose).
ROW_GATHERS = {
  "gather": lambda d, i, mode: jaxops.gather(d, i, 0, mode=mode, fill_value=0),
  "gather_nd": lambda d, i, mode: jaxops.gather_nd(
    d.reshape(10, -1, d.shape[-1]),
    jnp.stack([i % 10, i // 10], -1),
    mode=mode,
    fill_value=0,
  ),
}


@pytest.mark.parametrize("rows", [100, 300])
@pytest.mark.parametrize("mode", ["fill", "clip"])
@pytest.mark.parametrize(
  "index_dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64]
)
@pytest.mark.parametrize("name", ROW_GATHERS)
@pytest.mark.covering_modes
def test_row_transpose_adds_into_the_rows_the_primal_reads(
  name, index_dtype, mode, rows
):
  # The primal reads through other code (XLA's fill or clip mode, or the
  # stacked fill gather): reading row ids (row + 1, 0 for the fill) names
  # the row each output row read, and the vjp must add each cotangent row
  # there, the jvp read the tangent there. 100 rows: int8 indices reach
  # past them both ways; 300: uint8 and int8 cannot reach the end.
  gather = ROW_GATHERS[name]
  rng = np.random.default_rng([rows, np.dtype(index_dtype).itemsize])
  info = np.iinfo(index_dtype)
  low, high = max(info.min, -rows - 20), min(info.max, rows + 20)
  indices = rng.integers(low, high + 1, (6, 7)).astype(index_dtype)
  data = rng.standard_normal((rows, 3))
  ids = np.repeat(np.arange(1, rows + 1, dtype=np.float32)[:, None], 3, 1)
  read = np.asarray(jax.jit(gather, static_argnums=2)(ids, indices, mode))
  read = read[..., 0].astype(np.int64) - 1  # -1: no row (filled)
  ct = rng.standard_normal(read.shape + (3,))
  out, vjp = jax.vjp(
    lambda d: jax.jit(gather, static_argnums=2)(d, indices, mode), data
  )
  (grad,) = vjp(ct.astype(out.dtype))
  want = np.zeros((rows, 3), out.dtype)
  np.add.at(want, read[read >= 0], ct[read >= 0].astype(out.dtype))
  np.testing.assert_allclose(grad, want, rtol=1e-6)
  tangent = rng.standard_normal(data.shape)
  _, tangent_out = jax.jvp(
    lambda d: jax.jit(gather, static_argnums=2)(d, indices, mode),
    (data,),
    (tangent,),
  )
  picked = np.where(read[..., None] >= 0, tangent.astype(out.dtype)[read], 0)
  assert_same(tangent_out, picked)
