"""The operators in the configurations users run, not only in ours.

* Eager == jit: for every operator, input form (JAX and NumPy arrays of any
  width, Python lists and scalars) and mode, the eager and the jitted call give
  the same value, dtype and shape, or raise the same exception type. (Concrete
  out-of-range indices are the one documented difference: eager raises
  IndexError, jit applies the mode; see docs/semantics.md#out-of-range-indices.)
* No effects: nothing in the default path carries an effect, so
  `jax.export` works for every platform list, and a serialized round trip on
  CPU is bit-identical to the direct call, forward, grad, jvp and vmap.
* Symbolic dims: each operator exported once with symbolic dims in every
  position its shape rule holds one, called at several sizes (forward, vmap
  and the gradient through the deserialized function), on both paths of
  scatters with repeated targets (`scatter_orders`), and the named error
  where a dim must stay concrete.
* Permissive user configurations keep working (the suite itself runs strict).
* Retracing: equivalent static attributes reuse the compiled program.
* StridedSlice attributes over the whole int64 range.

Every test runs in both x64 modes (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import checkify

import jaxops
from tests.support import gather as gs
from tests.support import generators as gen
from tests.support import reductions as sr
from tests.support.asserts import assert_same, assert_same_bits
from tests.support.scatter import np_scatter_nd_update
from tests.support.scatter_order import ORDERS, order_dependent_hlo

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
INT64 = np.iinfo(np.int64)

# ---------------------------------------------------------------------------
# Field reports, each a test that failed before the fix.


def test_x32_numpy_float64_updates_take_canonical_dtype():
  args = (np.zeros((4, 5)), np.array([[0], [2]]), np.ones((2, 5)))
  eager = jaxops.scatter_nd_update(*args)
  assert_same(eager, np.array(jax.jit(jaxops.scatter_nd_update)(*args)))
  assert_same(
    eager, np.where(np.arange(4)[:, None] % 2 == 0, 1.0, np.zeros((4, 5)))
  )


def test_jax_float32_data_with_numpy_float64_updates(jax_mode):
  data = jnp.zeros((4, 5), jnp.float32)
  updates = np.ones((2, 5))
  call = functools.partial(jaxops.scatter_nd_update, data, np.array([[0], [2]]))
  if jax_mode == "x32":  # float64 is float32 here, as under jit
    assert_same(call(updates), np.array(jax.jit(call)(updates)))
    return
  for fn in (call, jax.jit(call)):
    with pytest.raises(
      TypeError,
      match=r"updates dtype float64 must equal "
      r"data dtype float32",
    ):
      fn(updates)


@pytest.mark.parametrize("rank", ["raise", "warn"])
@pytest.mark.parametrize("dtype", ["strict", "standard"])
@pytest.mark.covering_modes
def test_works_under_every_promotion_config(rank, dtype):
  with jax.numpy_rank_promotion(rank), jax.numpy_dtype_promotion(dtype):
    data = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    out = jaxops.gather_nd(data, np.array([[1, 2], [-1, 0]]))
    assert_same(out, np.array([7.0, 15.0], np.float32))
    out = jaxops.scatter_nd_update(
      data, np.array([[0], [-1]]), np.ones((2, 5), np.float32)
    )
    assert_same(out[::3], np.ones((2, 5), np.float32))
    grad = jax.grad(
      lambda d: jaxops.gather_elements(d, np.array([[0], [1]]), axis=1).sum()
    )(data[:2])
    assert_same(grad[:, :2], np.eye(2, dtype=np.float32))


# Every operator moves NaN payloads (quiet, signaling, negative) bit for bit
# where XLA:CPU computes the dtype in float32 (docs/design.md#moved-as-bits):
# against the NumPy reference on the same bits as unsigned ints, eagerly,
# jitted, and vmapped over data and over indices; the reductions keep the
# bits of every element no update reaches.
_NARROW_FLOATS = (
  jnp.bfloat16,
  jnp.float8_e5m2,
  jnp.float8_e4m3fn,  # two NaNs, +-0x7F: their sign is all they carry
  jnp.float16,
)
# In range (an eager call raises for others); the rows' first column < 3.
_ELEMENTS = np.array([[1, 0, 3, 2], [2, 2, 0, 1], [0, 3, 3, 0]])
_BIT_MOVES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
  # name: (the operator on (data, indices, updates), the reference on bits)
  "gather_elements": (
    lambda d, i, u: jaxops.gather_elements(d, i, 1, fill_value=0),
    lambda d, i, u: gs.np_gather_elements(d, i, 1, fill=0),
  ),
  "gather_elements_clip": (
    lambda d, i, u: jaxops.gather_elements(d, i, 1, mode="clip"),
    lambda d, i, u: gs.np_gather_elements(d, i, 1),
  ),
  "gather_nd_rows": (
    lambda d, i, u: jaxops.gather_nd(d, i[:, :1], fill_value=0),
    lambda d, i, u: gs.np_gather_nd(d, i[:, :1], fill=0),
  ),
  "gather": (
    lambda d, i, u: jaxops.gather(d, i, 1, 1, fill_value=0),
    lambda d, i, u: gs.np_gather(d, i, 1, 1, fill=0),
  ),
  "scatter_nd_update": (
    lambda d, i, u: jaxops.scatter_nd_update(d, i[:, :1], u),
    lambda d, i, u: np_scatter_nd_update(d, i[:, :1], u),
  ),
  "scatter_nd_update_unique": (
    lambda d, i, u: jaxops.scatter_nd_update(
      d, i[:2, 1:2], u[:2], unique_indices=True
    ),
    lambda d, i, u: np_scatter_nd_update(d, i[:2, 1:2], u[:2]),
  ),
  "scatter_elements_update": (
    lambda d, i, u: jaxops.scatter_elements_update(d, i, u, axis=1),
    lambda d, i, u: sr.np_scatter_elements(d, i, u, 1),
  ),
  "slice": (
    lambda d, i, u: jaxops.slice(d, [2], [0], [-1], [1]),
    lambda d, i, u: d[:, 2:0:-1],
  ),
  "strided_slice": (
    lambda d, i, u: jaxops.strided_slice(d, [2, 3], [0, 0], [-1, -2]),
    lambda d, i, u: d[2:0:-1, 3:0:-2],
  ),
}


def _nan_data(dtype, shape, seed=0):
  """Data of every NaN `dtype` holds (payloads, signaling, negative) and
  a few numbers, as (floats, their bits)."""
  unsigned = np.dtype(f"uint{8 * np.dtype(dtype).itemsize}")
  every = np.arange(np.iinfo(unsigned).max + 1).astype(unsigned)
  nans = every[np.isnan(every.view(dtype).astype(np.float32))]
  bits = np.random.default_rng(seed).choice(nans, shape)
  bits.flat[::5] = np.array([1.5, -0.0, 2.0], dtype).view(unsigned)[
    np.arange(bits.flat[::5].size) % 3
  ]
  return bits.view(dtype), bits


# The default run: bfloat16 through every operator and reduction; the other
# dtypes run the same lines of jaxops/ (--exhaustive).
@pytest.mark.exhaustive(default=9, keep=("bfloat16",))
@pytest.mark.scatter_orders(one=True)
@pytest.mark.parametrize("dtype", _NARROW_FLOATS, ids=gen.dtype_id)
@pytest.mark.parametrize("name", _BIT_MOVES)
def test_nan_payloads_move_bit_for_bit(name, dtype, scatter_order):
  op, reference = _BIT_MOVES[name]
  (data, bits), (updates, update_bits) = (
    _nan_data(dtype, (3, 4), seed) for seed in (0, 1)
  )

  def expected(d, i):
    return reference(d, i, update_bits).view(dtype)

  for how, call in {"eager": op, "jit": jax.jit(op)}.items():
    assert_same_bits(
      call(data, _ELEMENTS, updates), expected(bits, _ELEMENTS), how
    )
  # Batched data; batched indices where the operator reads them (the output
  # of an unbatched call is broadcast by JAX, not moved by jaxops).
  assert_same_bits(
    jax.vmap(op, (0, None, None))(
      np.stack([data, data[::-1]]), _ELEMENTS, updates
    ),
    np.stack([expected(bits, _ELEMENTS), expected(bits[::-1], _ELEMENTS)]),
    "vmap data",
  )
  if "slice" not in name:
    rolled = np.stack([_ELEMENTS, np.roll(_ELEMENTS, 1, 0)])
    assert_same_bits(
      jax.vmap(op, (None, 0, None))(data, rolled, updates),
      np.stack([expected(bits, index) for index in rolled]),
      "vmap indices",
    )


@pytest.mark.exhaustive(default=9, keep=("bfloat16",))
@pytest.mark.covering_modes
@pytest.mark.scatter_orders(one=True)
@pytest.mark.parametrize("dtype", _NARROW_FLOATS, ids=gen.dtype_id)
@pytest.mark.parametrize("reduction", ["sum", "prod", "mean"])
def test_reductions_keep_untouched_nan_payloads(
  reduction, dtype, scatter_order
):
  data, bits = _nan_data(dtype, (6, 3), seed=1)
  updates = np.array([[1, 2, 3]] * 4, dtype)
  rows = np.array([4, 1, 4, 4])
  out = jax.jit(
    lambda d, i, u: jaxops.scatter_elements_update(
      d, i, u, axis=0, reduction=reduction
    )
  )(data, np.broadcast_to(rows[:, None], (4, 3)), updates)
  expected = sr.np_scatter_elements(
    data, np.broadcast_to(rows[:, None], (4, 3)), updates, 0, reduction
  )
  assert_same(out, expected, reduction)
  out = np.asarray(out)
  untouched = [0, 2, 3, 5]
  assert_same_bits(out[untouched], data[untouched], f"{reduction}, untouched")
  summed = jaxops.scatter_nd_update(
    data, rows[:, None], updates, reduction="sum"
  )
  assert_same_bits(
    np.asarray(summed)[untouched], data[untouched], "ScatterNDUpdate sum"
  )


@pytest.mark.parametrize(
  "stop,stride,begin_mask,end_mask",
  [
    (-6, -(2**63), 0, 0),
    (0, -(2**63), 0, 0),
    (0, -(2**63), 1, 1),
    (-6, INT64.min, 0, 1),
    (5, INT64.max, 1, 0),
  ],
)
def test_strided_slice_extreme_strides(stop, stride, begin_mask, end_mask):
  """What tf.strided_slice returns: one element, for x[-1:-6:-2**63] etc."""
  x = np.arange(5.0, dtype=np.float32)
  start = -1 if stride < 0 else 0
  out = jaxops.strided_slice(
    x, [start], [stop], [stride], begin_mask=[begin_mask], end_mask=[end_mask]
  )
  expected = x[4:5] if stride < 0 else x[0:1]
  assert_same(out, expected)
  assert (
    jaxops.shapes.strided_slice(
      x.shape,
      [start],
      [stop],
      [stride],
      begin_mask=[begin_mask],
      end_mask=[end_mask],
    )
    == expected.shape
  )


# ---------------------------------------------------------------------------
# Operators and their argument forms.


@dataclasses.dataclass(frozen=True)
class Op:
  """One operator call: static attributes closed over, array args free."""

  name: str
  fn: Callable[..., jax.Array]
  args: tuple[Any, ...]  # canonical NumPy arguments, valid indices
  diff_argnums: tuple[int, ...]  # the float arguments


def _data(shape=(4, 5)):
  return np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)


_GATHER_ND_INDICES = np.array([[1, -1], [0, 2], [-4, 0]])
_GATHER_ELEMENTS_INDICES = np.array([[0, -1, 2], [4, 1, -5]])
_GATHER_INDICES = np.array([[0, -1, 2], [4, 1, -5], [3, 3, 0], [-2, 1, 1]])
_GATHER_OUT_OF_RANGE = np.array([[7, -1, 2], [-6, 0, 5]])
_SCATTER_INDICES = np.array([[2], [-4], [2]])  # a duplicate: last wins
_SCATTER_UPDATES = np.arange(10, 25, dtype=np.float32).reshape(3, 5)


def _ops() -> list[Op]:
  ops = []
  for mode in ("fill", "clip", "promise_in_bounds"):
    ops.append(
      Op(
        f"gather_nd_{mode}",
        functools.partial(jaxops.gather_nd, mode=mode),
        (_data(), _GATHER_ND_INDICES),
        (0,),
      )
    )
    ops.append(
      Op(
        f"gather_nd_batch1_{mode}",
        functools.partial(jaxops.gather_nd, batch_dims=1, mode=mode),
        (_data(), np.array([[0], [4], [-1], [2]])),
        (0,),
      )
    )
    ops.append(
      Op(
        f"gather_elements_{mode}",
        functools.partial(jaxops.gather_elements, axis=1, mode=mode),
        (_data()[:2], _GATHER_ELEMENTS_INDICES),
        (0,),
      )
    )
    ops.append(
      Op(
        f"gather_batch1_axis1_{mode}",
        functools.partial(jaxops.gather, axis=1, batch_dims=1, mode=mode),
        (_data(), _GATHER_INDICES),
        (0,),
      )
    )
  # Whole rows: the fill-mode gather of (data | fill block).
  ops.append(
    Op(
      "gather_nd_rows",
      jaxops.gather_nd,
      (_data(), np.array([[1], [-1], [0]])),
      (0,),
    )
  )
  # Out of range is Gather-8's defined result (zeros), eagerly as under jit.
  ops.append(
    Op(
      "gather_out_of_range",
      functools.partial(jaxops.gather, axis=-1),
      (_data(), _GATHER_OUT_OF_RANGE),
      (0,),
    )
  )
  for mode in ("drop", "clip", "promise_in_bounds"):
    for unique in (False, True):
      indices = _SCATTER_INDICES[:2] if unique else _SCATTER_INDICES
      updates = _SCATTER_UPDATES[:2] if unique else _SCATTER_UPDATES
      ops.append(
        Op(
          f"scatter_nd_update_{mode}{'_unique' if unique else ''}",
          functools.partial(
            jaxops.scatter_nd_update, mode=mode, unique_indices=unique
          ),
          (_data(), indices, updates),
          (0, 2),
        )
      )
  # One row per reduction engine path besides the unique write above: the
  # combiner scatter (max) and the fold (mean).
  ops.append(
    Op(
      "scatter_nd_update_max",
      functools.partial(jaxops.scatter_nd_update, reduction="max"),
      (_data(), _SCATTER_INDICES, _SCATTER_UPDATES),
      (0, 2),
    )
  )
  # The product's derivative: the sort and the segmented scans.
  ops.append(
    Op(
      "scatter_nd_update_prod",
      functools.partial(jaxops.scatter_nd_update, reduction="prod"),
      (_data(), _SCATTER_INDICES, _SCATTER_UPDATES),
      (0, 2),
    )
  )
  ops.append(
    Op(
      "scatter_elements_update_mean",
      functools.partial(
        jaxops.scatter_elements_update, axis=1, reduction="mean"
      ),
      (_data()[:2], _GATHER_ELEMENTS_INDICES, _data()[:2, :3] * 2),
      (0, 2),
    )
  )
  ops.append(
    Op(
      "strided_slice",
      functools.partial(
        jaxops.strided_slice,
        begin=[-1, 0, 0],
        end=[0, 0, 5],
        strides=[-2, 1, 2],
        end_mask=[0, 1],
        new_axis_mask=[0, 0, 1],
      ),
      (_data(),),
      (0,),
    )
  )
  ops.append(
    Op(
      "strided_slice_shrink",
      functools.partial(
        jaxops.strided_slice,
        begin=[1, -1],
        end=[0, 0],
        shrink_axis_mask=[1, 0],
        begin_mask=[0, 1],
        strides=[1, -1],
      ),
      (_data(),),
      (0,),
    )
  )
  ops.append(
    Op(
      "slice",
      functools.partial(
        jaxops.slice,
        start=[INT64.max, -9],
        stop=[INT64.min, 4],
        step=[-2, 3],
        axes=[-1, 0],
      ),
      (_data(),),
      (0,),
    )
  )
  return ops


OPS = _ops()
OP_IDS = [op.name for op in OPS]


def _forms(value: np.ndarray) -> dict[str, Any]:
  """The forms a user may pass one argument in."""
  forms = {"numpy": value, "jax": jnp.asarray(value), "list": value.tolist()}
  if np.issubdtype(value.dtype, np.floating):
    forms["numpy_float64"] = value.astype(np.float64)
    forms["numpy_float16"] = value.astype(np.float16)  # a real dtype mismatch
  else:
    for dtype in (
      np.int8,
      np.int16,
      np.int32,
      np.int64,
      np.uint8 if value.min() >= 0 else np.int16,
    ):
      forms[f"numpy_{np.dtype(dtype).name}"] = value.astype(dtype)
    forms["jax_int32"] = jnp.asarray(value, jnp.int32)
  return forms


def _outcome(fn, args):
  try:
    return "value", fn(*args)
  except Exception as e:  # compared by type with the other call's outcome
    return "raised", type(e)


def _cases(op: Op):
  for argnum, value in enumerate(op.args):
    for form, converted in _forms(value).items():
      args = list(op.args)
      args[argnum] = converted
      yield f"arg{argnum}_{form}", tuple(args)


@pytest.mark.exhaustive(default=3)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
@pytest.mark.covering_modes
def test_eager_equals_jit_for_every_input_form(op):
  jitted = jax.jit(op.fn)
  for label, args in _cases(op):
    eager_kind, eager = _outcome(op.fn, args)
    jit_kind, jit = _outcome(jitted, args)
    assert eager_kind == jit_kind, (label, eager, jit)
    if eager_kind == "raised":
      assert eager is jit, (label, eager, jit)
    else:
      assert_same(eager, np.asarray(jit), label)


def test_eager_equals_jit_for_python_scalar_updates():
  """A 0-d update as a Python scalar: weakly typed under jit, as eagerly."""
  update = functools.partial(
    jaxops.scatter_nd_update, np.zeros(3, np.float16), np.array([1])
  )
  for value in (2, 2.5):
    assert_same(update(value), np.array(jax.jit(update)(value)))
  int_update = functools.partial(
    jaxops.scatter_nd_update, np.zeros(3, np.int32), np.array([1])
  )
  assert_same(int_update(2), np.array(jax.jit(int_update)(2)))
  for fn in (int_update, jax.jit(int_update)):
    with pytest.raises(TypeError, match="updates given as a Python float"):
      fn(2.5)
    with pytest.raises(TypeError, match="updates dtype bool must equal"):
      fn(True)


# ---------------------------------------------------------------------------
# No effects, and jax.export for every platform.


def _transformed(op: Op, transform: str):
  """(function of op.args, its arguments) for one transformation."""
  args = op.args
  if transform == "fwd":
    return op.fn, args
  if transform == "grad":
    loss = lambda *a: jnp.sum(jnp.sin(op.fn(*a)))
    return jax.grad(loss, argnums=op.diff_argnums), args
  if transform == "jvp":
    tangents = tuple(
      np.ones_like(a)
      if i in op.diff_argnums
      else np.zeros(a.shape, jax.dtypes.float0)
      for i, a in enumerate(args)
    )
    return (lambda *a: jax.jvp(op.fn, a, tangents)), args
  assert transform == "vmap"
  return jax.vmap(op.fn), tuple(np.stack([a, a]) for a in args)


@pytest.mark.exhaustive(default=10)
@pytest.mark.parametrize("transform", ["fwd", "grad", "jvp", "vmap"])
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
@pytest.mark.covering_modes
def test_export_every_platform_round_trips(op, transform):
  fn, args = _transformed(op, transform)
  assert not jax.make_jaxpr(fn)(*args).effects
  exported = jax.export.export(jax.jit(fn), platforms=PLATFORMS)(*args)
  assert exported.platforms == PLATFORMS
  restored = jax.export.deserialize(exported.serialize())
  for got, want in zip(
    jax.tree.leaves(restored.call(*args)), jax.tree.leaves(jax.jit(fn)(*args))
  ):
    assert_same(got, np.asarray(want))


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
@pytest.mark.covering_modes
def test_export_vmap_over_a_symbolic_batch(op):
  """`jax.export` of a vmapped call whose batch is a symbolic dim, called
  with a batch of 3. The default ScatterNDUpdate's row write compared the
  flat row count with the int32 range (InconclusiveDimensionOperation)."""
  (batch,) = jax.export.symbolic_shape("batch")
  fn = jax.vmap(op.fn)
  specs = [
    jax.ShapeDtypeStruct((batch,) + np.shape(a), np.asarray(a).dtype)
    for a in op.args
  ]
  exported = jax.export.export(jax.jit(fn))(*specs)
  args = tuple(np.stack([a, a, a]) for a in op.args)
  assert_same(exported.call(*args), np.asarray(jax.jit(fn)(*args)))


# ---------------------------------------------------------------------------
# JAX's debugging switches.


def _debugged_rows():
  """Every operator row and transformation on float32, and the fill-mode
  gathers' on complex64 too (a complex NaN fill; no grad of a complex
  loss)."""
  for op in OPS:
    for transform in ("fwd", "grad", "jvp", "vmap"):
      yield pytest.param(op, transform, np.float32, id=f"{op.name}-{transform}")
      if op.name.startswith("gather") and transform != "grad":
        yield pytest.param(
          op, transform, np.complex64, id=f"{op.name}-{transform}-complex64"
        )


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("op,transform,dtype", list(_debugged_rows()))
@pytest.mark.covering_modes
@pytest.mark.scatter_orders(one=True)
def test_debugging_switches_change_nothing(op, transform, dtype, scatter_order):
  """Under `jax.disable_jit()` with `jax_debug_nans` and `jax_debug_infs`
  (how JAX's docs find where a NaN appears: each primitive runs on its own
  and its output is checked), each call gives the jitted call's result and
  raises nothing: a NaN or inf exists inside jaxops only where the result
  holds it. Failed before: under disable_jit the sort's primitive called
  itself (RecursionError in every product gradient), and the fill-mode
  gathers built their NaN fill before knowing whether a tuple was out of
  range (FloatingPointError)."""
  op = dataclasses.replace(
    op,
    args=tuple(
      a.astype(dtype) if i in op.diff_argnums else a
      for i, a in enumerate(op.args)
    ),
  )
  fn, args = _transformed(op, transform)
  want = jax.jit(fn)(*args)
  with jax.disable_jit(), jax.debug_nans(True), jax.debug_infs(True):
    got = fn(*args)
  for got_leaf, want_leaf in zip(
    jax.tree.leaves(got), jax.tree.leaves(want), strict=True
  ):
    assert_same(np.asarray(got_leaf), np.asarray(want_leaf))


# ---------------------------------------------------------------------------
# Symbolic dims in the operators' own shapes (docs/export.md#symbolic-dims).

SIZES = (1, 3, 6)  # of the symbolic dim b, and c = b + 1 (jax.export: >= 1)
# The symbolic export's default rows call at one of them, the smallest or
# the largest (SYMBOLIC_DEFAULT; each size compiles the exported and the
# jitted function again); --exhaustive at all three.
DEFAULT_SIZES = ((1,), (6,))
INT32 = np.iinfo(np.int32)


@dataclasses.dataclass(frozen=True)
class Symbolic:
  """One call with symbolic dims b and c at some positions of its shapes."""

  fn: Callable[..., jax.Array]  # static attributes closed over
  shapes: tuple[str, ...]  # a jax.export.symbolic_shape spec per argument
  args: Callable[[int, int], tuple[np.ndarray, ...]]  # those for sizes b, c
  diff_argnums: tuple[int, ...] = (0,)
  # Indices out of range, which an eager call rejects (IndexError).
  out_of_range: bool = False

  @property
  def op(self) -> str:
    fn = self.fn.func if isinstance(self.fn, functools.partial) else self.fn
    return fn.__name__


def _indices(shape, size, seed=0, out_of_range=False, dtype=np.int32):
  """Indices into a dim of `size`, negative ones included; out of range
  also below -size, at and beyond size, and the int32 extremes."""
  rng = np.random.default_rng(seed)
  if not out_of_range:
    return rng.integers(-size, size, shape).astype(dtype)
  values = rng.integers(-2 * size - 1, 2 * size + 1, shape).astype(dtype)
  extremes = [INT32.min, INT32.max, -size - 1, size, -size, size - 1]
  flat = values.reshape(-1)
  flat[: len(extremes)] = extremes[: flat.size]
  return values


def _symbolic_cases() -> dict[str, Symbolic]:
  p = functools.partial
  return {
    # GatherND-8: batch dims, tuples, indexed dims (one of them static) and
    # the dims after them symbolic; every indexed dim symbolic, out of
    # range, in fill and clip mode (int64 indices).
    "gather_nd": Symbolic(
      p(jaxops.gather_nd, batch_dims=1),
      ("b, c, 3, c", "b, b, 2"),
      lambda b, c: (
        _data((b, c, 3, c)),
        np.stack([_indices((b, b), c, 1), _indices((b, b), 3, 2)], -1),
      ),
    ),
    "gather_nd_fill": Symbolic(
      p(jaxops.gather_nd, fill_value=-1.0),
      ("b, c", "c, 2"),
      lambda b, c: (
        _data((b, c)),
        _indices((c, 2), b, b, out_of_range=True),
      ),
      out_of_range=True,
    ),
    "gather_nd_clip_int64": Symbolic(
      p(jaxops.gather_nd, mode="clip"),
      ("b, 4", "c, 1"),
      lambda b, c: (
        _data((b, 4)),
        _indices((c + 5, 1), b, b, out_of_range=True, dtype=np.int64),
      ),
      out_of_range=True,
    ),
    # Gather-8: batch dims, the dims before and after the axis, the axis,
    # indices' own dims; its default fill reads zeros out of range, eagerly
    # too. Clip.
    "gather": Symbolic(
      p(jaxops.gather, axis=2, batch_dims=1),
      ("b, c, c, b", "b, c"),
      lambda b, c: (
        _data((b, c, c, b)),
        _indices((b, c), c, b, out_of_range=True),
      ),
    ),
    "gather_clip": Symbolic(
      p(jaxops.gather, axis=-1, mode="clip"),
      ("3, b", "c + 5"),
      lambda b, c: (_data((3, b)), _indices((c + 5,), b, out_of_range=True)),
      out_of_range=True,
    ),
    # GatherElements-11/13: the axis, the other dims, indices smaller than
    # data there (provably), indices' axis dim; fill out of range.
    "gather_elements": Symbolic(
      p(jaxops.gather_elements, axis=1, mode="clip"),
      ("b + 1, c, 4", "b, b, 3"),
      lambda b, c: (_data((b + 1, c, 4)), _indices((b, b, 3), c, b)),
    ),
    "gather_elements_fill": Symbolic(
      p(jaxops.gather_elements, axis=-1, fill_value=0.5),
      ("3, b", "2, c + 5"),
      lambda b, c: (
        _data((3, b)),
        _indices((2, c + 5), b, b, out_of_range=True),
      ),
      out_of_range=True,
    ),
    # Slice-8 and StridedSlice-1: dims sliced forwards and backwards (int64
    # extremes), kept whole, shrunk, new axes and the ellipsis.
    "slice": Symbolic(
      p(
        jaxops.slice,
        start=[1, -2],
        stop=[-1, INT64.min],
        step=[2, -3],
        axes=[2, 0],
      ),
      ("b, c, c",),
      lambda b, c: (_data((b, c, c)),),
    ),
    "slice_extremes": Symbolic(
      p(
        jaxops.slice,
        start=[INT64.max, -9, INT64.min],
        stop=[INT64.min, 4, 2**40],
        step=[-2, 3, INT64.max],
        axes=[-1, 0, 1],
      ),
      ("b, c, b",),
      lambda b, c: (_data((b, c, b)),),
    ),
    "strided_slice": Symbolic(
      p(
        jaxops.strided_slice,
        begin=[-1, 0, 0, 1, 0],
        end=[0, 0, 0, 2**31, -1],
        strides=[1, 1, 1, 3, INT64.min],
        shrink_axis_mask=[1],
        ellipsis_mask=[0, 1],
        new_axis_mask=[0, 0, 1],
        end_mask=[0, 0, 0, 0, 1],
      ),
      ("b, 2, c, b, c",),
      lambda b, c: (_data((b, 2, c, b, c)),),
    ),
    "strided_slice_backwards": Symbolic(
      p(
        jaxops.strided_slice,
        begin=[-1, 5, -2],
        end=[0, -(2**40), 1],
        strides=[-2, -1, -(2**40)],
        end_mask=[0, 0, 1],
      ),
      ("c, b, b",),
      lambda b, c: (_data((c, b, b)),),
    ),
    # ScatterNDUpdate-3/15: indexed dims (one of them static), the dims
    # after them, the tuples' leading dims, with repeated targets (last
    # wins); the fold of sum with int64 indices out of range (dropped);
    # prod clipped.
    "scatter_nd_update": Symbolic(
      p(jaxops.scatter_nd_update),
      ("c, 3, b", "b, c, 2", "b, c, b"),
      lambda b, c: (
        _data((c, 3, b)),
        np.stack([_indices((b, c), c, 1), _indices((b, c), 3, 2)], -1),
        -_data((b, c, b)),
      ),
      diff_argnums=(0, 2),
    ),
    "scatter_nd_update_sum_drop": Symbolic(
      p(jaxops.scatter_nd_update, reduction="sum"),
      ("b, 2", "c + 5, 1", "c + 5, 2"),
      lambda b, c: (
        _data((b, 2)),
        _indices((c + 5, 1), b, b, out_of_range=True, dtype=np.int64),
        -_data((c + 5, 2)),
      ),
      diff_argnums=(0, 2),
      out_of_range=True,
    ),
    "scatter_nd_update_prod_clip": Symbolic(
      p(jaxops.scatter_nd_update, reduction="prod", mode="clip"),
      ("b, c", "c, 1", "c, c"),
      lambda b, c: (
        _data((b, c)),
        _indices((c, 1), b, c, out_of_range=True),
        _data((c, c)) / 8,
      ),
      diff_argnums=(0, 2),
    ),
    # max, dropped: the key path's start values and canonical NaN, whose
    # shapes follow the symbolic dims (data and updates interleaved, so that
    # either may win).
    "scatter_nd_update_max_drop": Symbolic(
      p(jaxops.scatter_nd_update, reduction="max"),
      ("b, c", "c + 3, 1", "c + 3, c"),
      lambda b, c: (
        _data((b, c)) * 2,
        _indices((c + 3, 1), b, 5, out_of_range=True),
        _data((c + 3, c)) * 2 + 1 - b * c,
      ),
      diff_argnums=(0, 2),
      out_of_range=True,
    ),
    # ScatterElementsUpdate-12: the axis (indices longer there: repeated
    # targets), the other dims (indices smaller, provably), clipped; min;
    # mean
    # without data, out of range, each index shared along its row (the row
    # fold's run-time test).
    "scatter_elements_update_clip": Symbolic(
      p(jaxops.scatter_elements_update, axis=1, mode="clip"),
      ("b + 1, c, 4", "b, c + 5, 3", "b, c + 5, 3"),
      lambda b, c: (
        _data((b + 1, c, 4)),
        _indices((b, c + 5, 3), c, 3, out_of_range=True),
        -_data((b, c + 5, 3)),
      ),
      diff_argnums=(0, 2),
    ),
    "scatter_elements_update_min": Symbolic(
      p(jaxops.scatter_elements_update, axis=0, reduction="min"),
      ("b, c", "b + 2, c", "b + 2, c"),
      lambda b, c: (
        _data((b, c)) * 2,
        _indices((b + 2, c), b, 6),
        _data((b + 2, c)) * 2 + 1 - b * c,
      ),
      diff_argnums=(0, 2),
    ),
    # Found in the field: the number of updates a symbolic dim that may be 1
    # (its repeat handling asked `n > 1` of it).
    "scatter_elements_update_1d": Symbolic(
      p(jaxops.scatter_elements_update, axis=0),
      ("b + 1", "b", "b"),
      lambda b, c: (_data((b + 1,)), _indices((b,), b + 1, 7), -_data((b,))),
      diff_argnums=(0, 2),
    ),
    "scatter_elements_update_mean_rows_drop": Symbolic(
      p(
        jaxops.scatter_elements_update,
        axis=0,
        reduction="mean",
        use_init_val=False,
      ),
      ("b, c", "b, c", "b, c"),
      lambda b, c: (
        _data((b, c)),
        np.repeat(_indices((b, 1), b, 4, out_of_range=True), c, 1),
        -_data((b, c)),
      ),
      diff_argnums=(0, 2),
      out_of_range=True,
    ),
  }


SYMBOLIC = _symbolic_cases()


def _specs(shapes, dtypes) -> list[jax.ShapeDtypeStruct]:
  """The arguments' specs, their symbolic dims in one scope."""
  scope = jax.export.SymbolicScope()
  return [
    jax.ShapeDtypeStruct(jax.export.symbolic_shape(shape, scope=scope), dtype)
    for shape, dtype in zip(shapes, dtypes)
  ]


def _canonical(args):
  """Arguments in the dtypes JAX gives them in this x64 mode, as the
  exported function's signature has them."""
  return tuple(
    np.asarray(a).astype(jax.dtypes.canonicalize_dtype(np.asarray(a).dtype))
    for a in args
  )


def _with_vmap(fn):
  """`fn` and its vmap over two calls: the arguments, and floats doubled and
  indices reversed along their first dim."""

  def pair(a):
    if jnp.issubdtype(a.dtype, jnp.floating):
      return jnp.stack([a, 2 * a])
    return jnp.stack([a, jnp.flip(a, 0)])

  def both(*args):
    return fn(*args), jax.vmap(fn)(*map(pair, map(jnp.asarray, args)))

  return both


def _loss(outputs):
  """A sum of the outputs weighted by small integers: its gradient is exact
  whatever the order of the sums."""
  total = 0.0
  for out in jax.tree.leaves(outputs):
    weights = (jnp.arange(out.size) % 5 + 1).astype(out.dtype)
    total = total + jnp.sum(out * weights.reshape(out.shape))
  return total


def _and_gradient(fn, argnums):
  """`fn` and the gradient of `_loss` of it, as one jitted function."""
  grad = jax.grad(lambda *a: _loss(fn(*a)), argnums=argnums)
  return jax.jit(lambda *a: (fn(*a), grad(*a)))


# The rows the default run takes: the gathers' ordered transpose, the
# slices, the constructed paths of both scatters and the symbolic product's
# scan; the other cases and paths (the mean's row fold among them) run with
# --exhaustive. Together they run every line and branch of jaxops/ that a
# symbolic dim reaches and no other test does (coverage.py, per test); every
# operator's symbolic batch is test_export_vmap_over_a_symbolic_batch's.
# Each at its size of DEFAULT_SIZES.
SYMBOLIC_DEFAULT = {
  ("gather_nd_fill", "constructed"): DEFAULT_SIZES[0],
  ("slice", "serial"): DEFAULT_SIZES[1],
  ("strided_slice", "serial"): DEFAULT_SIZES[0],
  ("scatter_nd_update_prod_clip", "constructed"): DEFAULT_SIZES[0],
  ("scatter_elements_update_clip", "constructed"): DEFAULT_SIZES[0],
}
SYMBOLIC_ROWS = [
  pytest.param(
    name,
    order,
    SYMBOLIC_DEFAULT.get((name, order), SIZES),
    id=f"{order}-{name}",
    marks=() if (name, order) in SYMBOLIC_DEFAULT else pytest.mark.exhaustive,
  )
  for name, case in SYMBOLIC.items()
  # A slice has no repeated targets: one path.
  for order in (
    ORDERS if case.op.startswith(("scatter", "gather")) else ORDERS[:1]
  )
]


@pytest.mark.lowest_versions
@pytest.mark.covering_modes
@pytest.mark.parametrize(
  "name,scatter_order,sizes", SYMBOLIC_ROWS, indirect=["scatter_order"]
)
def test_symbolic_dims_export(name, scatter_order, sizes):
  """Export once (for every platform, with the derivative), serialize,
  deserialize; at each size, the call, its vmap and its gradient through
  the deserialized function equal the jitted call bit for bit, and the call
  the eager one where its indices are in range (an eager call raises for
  concrete out-of-range indices). A scatter exports both paths, and with
  the constructed path forced (`scatter_order`) the CPU program holds no
  scatter that depends on the order of repeated targets, nor does a
  gather's gradient (its transpose is the sorted fold); every run of
  repeated targets is shorter than a chunk, where both paths give the same
  bits."""
  case = SYMBOLIC[name]
  fn = _with_vmap(case.fn)
  export = jax.export.export(jax.jit(fn), platforms=PLATFORMS)
  specs = _specs(case.shapes, [a.dtype for a in _canonical(case.args(2, 3))])
  restored = jax.export.deserialize(export(*specs).serialize(vjp_order=1))
  if case.op.startswith(("scatter", "gather")):
    modules = [restored.mlir_module(), restored.vjp().mlir_module()]
    found = [order_dependent_hlo(text) for text in modules]
    if scatter_order == "constructed":
      assert found == [[], []], found
    elif case.op.startswith("scatter"):
      assert found[0], "the serial CPU path"
  exported = _and_gradient(restored.call, case.diff_argnums)
  reference = _and_gradient(fn, case.diff_argnums)
  for b in sizes:
    args = _canonical(case.args(b, b + 1))
    got = exported(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(reference(*args))):
      assert_same(g, np.asarray(w), f"{name}, b={b}")
    if not case.out_of_range:
      assert_same(got[0][0], np.asarray(case.fn(*args)), f"{name}, b={b}")


# A dim a rule needs as a number, or a rule that holds for some sizes only.
SYMBOLIC_ERRORS = {
  "gather_nd_tuple_length": (
    jaxops.gather_nd,
    ("4, 5", "3, b"),
    TypeError,
    r"^GatherND-8: indices shape\[-1\] \(the index tuple length k\) must "
    r"be an int, got the symbolic dim b",
  ),
  "gather_nd_batch_dims_differ": (
    functools.partial(jaxops.gather_nd, batch_dims=1),
    ("b, 5", "3, 1"),
    ValueError,
    r"^GatherND-8: the first batch_dims=1 dims of data and indices must be "
    r"equal, got \(b,\) vs \(3,\)",
  ),
  "gather_elements_indices_may_exceed_data": (
    functools.partial(jaxops.gather_elements, axis=1),
    ("4, 5", "b, 5"),
    ValueError,
    r"^GatherElements-13: indices.shape\[0\]=b must be <= data.shape\[0\]=4 "
    r".*; it must hold for every size of the symbolic dims \['b'\]",
  ),
  "scatter_nd_update_tuple_length": (
    jaxops.scatter_nd_update,
    ("4, 5", "3, b", "3, 5"),
    TypeError,
    r"^ScatterNDUpdate-3: indices shape\[-1\] \(the index tuple length k\) "
    r"must be an int, got the symbolic dim b",
  ),
  "scatter_elements_update_indices_may_exceed_data": (
    functools.partial(jaxops.scatter_elements_update, axis=1),
    ("4, 5", "b, 5", "b, 5"),
    ValueError,
    r"^ScatterElementsUpdate-12: indices.shape\[0\]=b must be <= "
    r"data.shape\[0\]=4 .*; it must hold for every size of the symbolic "
    r"dims \['b'\]",
  ),
  "strided_slice_shrink_may_be_out_of_range": (
    functools.partial(
      jaxops.strided_slice, begin=[2], end=[0], shrink_axis_mask=[1]
    ),
    ("b, 3",),
    ValueError,
    r"^StridedSlice-1: shrink_axis_mask\[0\] takes the element at "
    r"begin\[0\]=2, out of range for data dim 0 of size b .*symbolic dims "
    r"\['b'\]",
  ),
}


@pytest.mark.lowest_versions
def test_concrete_indices_against_a_symbolic_dim():
  """Concrete indices (closed over) raise IndexError against a symbolic dim
  only where they are out of range for every size it can take; otherwise
  `mode` applies at run time, as for traced indices."""
  indices = np.array([[5], [-2]])
  fn = jax.jit(lambda d: jaxops.gather_nd(d, indices, mode="clip"))
  spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 2"), np.float32)
  exported = jax.export.export(fn)(spec)
  for n in (2, 7):
    data = _data((n, 2))
    assert_same(exported.call(data), data[np.clip([5, n - 2], 0, n - 1)])
  with pytest.raises(IndexError, match="5 is out of range"):
    fn(_data((2, 2)))
  shape = jax.export.symbolic_shape("b, 2", constraints=("b <= 5",))
  with pytest.raises(
    IndexError,
    match=r"^GatherND-8: indices\[0, 0\]=5 is out of range for a dim of "
    r"size b \(valid",
  ):
    jax.export.export(fn)(jax.ShapeDtypeStruct(shape, np.float32))


@pytest.mark.lowest_versions
@pytest.mark.parametrize("name", SYMBOLIC_ERRORS)
def test_symbolic_dims_that_must_be_concrete_are_named(name):
  fn, shapes, error, message = SYMBOLIC_ERRORS[name]
  # data, indices and, for the scatters, updates.
  specs = _specs(shapes, [np.float32, np.int32, np.float32][: len(shapes)])
  with pytest.raises(error, match=message):
    jax.export.export(jax.jit(fn))(*specs)


def test_checkify_still_reports_dropped_scatter_tuples():
  checked = checkify.checkify(
    jax.jit(jaxops.scatter_nd_update), errors=checkify.user_checks
  )
  err, out = checked(_data(), np.array([[1], [9]]), _SCATTER_UPDATES[:2])
  with pytest.raises(
    checkify.JaxRuntimeError,
    match=r"ScatterNDUpdate-3: an "
    r"index tuple is out of range for the indexed dims \(4,\)",
  ):
    err.throw()
  assert_same(out[1], _SCATTER_UPDATES[0])
  err, _ = checked(_data(), np.array([[1], [-4]]), _SCATTER_UPDATES[:2])
  assert err.get() is None


# ---------------------------------------------------------------------------
# Retracing: equivalent static attributes, one program.


@contextlib.contextmanager
def _count_traces():
  """Counts jaxpr traces (every jit trace, inner ones included)."""
  events = []

  def listener(name, duration, **kwargs):
    del duration, kwargs
    if name == "/jax/core/compile/jaxpr_trace_duration":
      events.append(name)

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield events
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


_EQUIVALENT_ATTRIBUTES = {
  "gather_nd_batch_dims": (
    lambda d, i, b: jaxops.gather_nd(d, i, batch_dims=b),
    (_data(), np.array([[0], [4], [-1], [2]])),
    [1, np.int64(1), np.array(1, np.int32)],
  ),
  "gather_elements_axis": (
    lambda d, i, a: jaxops.gather_elements(d, i, axis=a),
    (_data()[:2], _GATHER_ELEMENTS_INDICES),
    [1, -1, np.int32(-1), np.array(1)],
  ),
  "gather_fill_value": (
    lambda d, i, f: jaxops.gather_nd(d, i, fill_value=f),
    (_data(), _GATHER_ND_INDICES),
    [0.5, np.float32(0.5), np.array(0.5)],
  ),
  "gather_axis_batch_dims": (
    lambda d, i, ab: jaxops.gather(d, i, *ab),
    (_data(), _GATHER_INDICES),
    [(1, 1), (-1, -1), (np.int64(1), np.array(-1, np.int32))],
  ),
  "gather_default_fill_value": (
    lambda d, i, f: jaxops.gather(d, i, 1, fill_value=f),
    (_data(), _GATHER_OUT_OF_RANGE),
    [None, 0, np.int32(0), np.array(0)],
  ),
  "slice_spec": (
    lambda d, s: jaxops.slice(d, *s),
    (_data(),),
    [
      ([-1, 0], [0, 9], [-2, 1], [1, 0]),
      ((-1, 0), (0, 9), (-2, 1), (-1, -2)),
      (
        np.array([-1, 0]),
        np.array([0, 9]),
        np.array([-2, 1]),
        np.array([1, 0]),
      ),
    ],
  ),
  "scatter_unique_indices": (
    lambda d, i, u, q: jaxops.scatter_nd_update(d, i, u, unique_indices=q),
    (_data(), _SCATTER_INDICES[:2], _SCATTER_UPDATES[:2]),
    [True, np.bool_(True)],
  ),
  "strided_slice_spec": (
    lambda d, s: jaxops.strided_slice(d, *s[:3], **s[3]),
    (_data(),),
    [
      ([-1, 0], [0, 0], [-2, 1], {"end_mask": [0, 1]}),
      ((-1, 0), (0, 0), (-2, 1), {"end_mask": (0, 1, 0, 0)}),
      (
        np.array([-1, 0]),
        np.array([0, 9]),
        np.array([-2, 1]),
        {"end_mask": 2, "begin_mask": 0},
      ),
      ([-1, 0], [0, 0], [-2, 1], {"end_mask": np.array([0, 1])}),
    ],
  ),
}


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", _EQUIVALENT_ATTRIBUTES)
def test_equivalent_attributes_do_not_retrace(name):
  call, args, variants = _EQUIVALENT_ATTRIBUTES[name]
  first = call(*args, variants[0])
  for variant in variants[1:]:
    with _count_traces() as eager_traces:
      out = call(*args, variant)
    assert not eager_traces, (name, variant)
    assert_same(out, np.asarray(first))
  # Under an outer jit only the outer function is traced; the operator's own
  # program is reused.
  jax.jit(lambda *a: call(*a, variants[0]))(*args)
  for variant in variants[1:]:
    with _count_traces() as outer_traces:
      jax.jit(lambda *a, v=variant: call(*a, v))(*args)
    assert len(outer_traces) == 1, (name, variant, len(outer_traces))


# ---------------------------------------------------------------------------
# StridedSlice attributes over the whole int64 range.

_EXTREMES = st.sampled_from(
  [
    INT64.min,
    INT64.min + 1,
    -(2**32),
    -7,
    -6,
    -5,
    -1,
    0,
    1,
    4,
    5,
    6,
    2**32,
    INT64.max - 1,
    INT64.max,
  ]
)
_INT64 = st.one_of(
  _EXTREMES, st.integers(INT64.min, INT64.max), st.integers(-8, 8)
)


@st.composite
def _int64_specs(draw):
  shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
  m = draw(st.integers(1, 4))
  values = [draw(st.lists(_INT64, min_size=m, max_size=m)) for _ in range(3)]
  kinds = draw(
    st.lists(
      st.sampled_from(
        [
          "slice",
          "slice",
          "slice",
          "begin",
          "end",
          "both",
          "new_axis",
          "shrink",
          "ellipsis",
        ]
      ),
      min_size=m,
      max_size=m,
    )
  )
  return shape, values, kinds


def _masks(kinds):
  bits = {
    "begin_mask": ("begin", "both"),
    "end_mask": ("end", "both"),
    "new_axis_mask": ("new_axis",),
    "shrink_axis_mask": ("shrink",),
    "ellipsis_mask": ("ellipsis",),
  }
  return {
    name: [int(kind in which) for kind in kinds] for name, which in bits.items()
  }


def _numpy_index(shape, begin, end, strides, kinds):
  """The spec as a NumPy index, or None where jaxops must raise ValueError.

  Python slicing with the runtime's one difference (docs/semantics.md#ss-8):
  with a negative stride, a begin still below 0 after adding the size starts
  at element 0.
  """
  if kinds.count("ellipsis") > 1:
    return None
  named = sum(kind not in ("new_axis", "ellipsis") for kind in kinds)
  if named > len(shape):
    return None
  index, dim = [], 0
  for kind, b, e, k in zip(kinds, begin, end, strides):
    if kind == "ellipsis":
      index.append(Ellipsis)
      dim += len(shape) - named
    elif kind == "new_axis":
      index.append(None)
    elif kind == "shrink":
      size = shape[dim]
      if not -size <= b < size:
        return None
      index.append(b)
      dim += 1
    else:
      if k == 0:
        return None
      size = shape[dim]
      if k < 0 and b < -size and kind not in ("begin", "both"):
        b = 0
      index.append(
        slice(
          None if kind in ("begin", "both") else b,
          None if kind in ("end", "both") else e,
          k,
        )
      )
      dim += 1
  return tuple(index)


@pytest.mark.covering_modes
@hypothesis.settings(max_examples=200, deadline=None, derandomize=True)
@hypothesis.given(_int64_specs())
def test_strided_slice_int64_attributes(spec):
  shape, (begin, end, strides), kinds = spec
  x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
  masks = _masks(kinds)
  index = _numpy_index(shape, begin, end, strides, kinds)
  if index is None:
    with pytest.raises(ValueError, match=r"^StridedSlice-1: "):
      jaxops.strided_slice(x, begin, end, strides, **masks)
    return
  expected = x[index]
  assert_same(jaxops.strided_slice(x, begin, end, strides, **masks), expected)
  assert (
    jaxops.shapes.strided_slice(shape, begin, end, strides, **masks)
    == expected.shape
  )
