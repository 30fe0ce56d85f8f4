"""Serial where the backend is serial (docs/design.md#serial-cpu).

jaxops relies on XLA:CPU applying a scatter's updates one at a time in index
order (`jaxops._order`). The tripwire: XLA's own scatter, on sizes a parallel
emitter would split, bit-equal to NumPy's serial references for add,
multiply and set, under jit and vmap, on float32 and float64; each failure
says what broke and how to route CPU to the constructed path. Then what the
switch builds: a program compiled for CPU holds only the plain scatter (no
sort, no loop, no repeat test, on the optimized HLO), a program exported
for CUDA or TPU holds the constructed path, and one exported for several
platforms carries both and runs right on CPU; the environment switch forces
the constructed path on CPU. And the CPU program's shape: one loop prepares
the indices, updates and the gathers' cotangents are read where they are,
reductions scatter narrow targets.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxops
from jaxops import _order
from tests.support import reductions
from tests.support.asserts import assert_same
from tests.support.scatter_order import order_dependent_hlo

# 4M updates into 16 slots: far beyond any work split a parallel emitter
# would make, and 250k repeats per slot, so that every order shows.
UPDATES = 1 << 22
SLOTS = 16

BROKEN = (
  "XLA's CPU scatter no longer applies updates serially in index order "
  "({what}). jaxops' CPU path (jaxops/_order.py) relies on it: route CPU "
  "to the constructed path (make `by_platform` return `constructed` on "
  "every platform) and record the change in docs/design.md#serial-cpu. "
  "Users get that path today with JAXOPS_SCATTER_ORDER=constructed."
)


def _serial_case(dtype, op):
  rng = np.random.default_rng([UPDATES, SLOTS, op == "mul"])
  target = rng.integers(0, SLOTS, UPDATES).astype(np.int32)
  if op == "mul":
    # Factors near 1: 250k of them per slot stay finite, and round.
    updates = 1 + rng.standard_normal(UPDATES) * 1e-3
  else:
    updates = rng.standard_normal(UPDATES) * 100
  data = rng.standard_normal(SLOTS)
  return data.astype(dtype), target, updates.astype(dtype)


def _serial_reference(data, target, updates, op):
  out = data.copy()
  if op == "add":
    np.add.at(out, target, updates)
  elif op == "mul":
    np.multiply.at(out, target, updates)
  else:
    # The last update of each slot, found without relying on any order.
    slots, last = np.unique(target[::-1], return_index=True)
    out[slots] = updates[::-1][last]
  return out


def _plain(data, target, updates, op):
  ref = data.at[target]
  if op == "add":
    return ref.add(updates, mode="drop")
  if op == "mul":
    return ref.multiply(updates, mode="drop")
  return ref.set(updates, mode="drop")


DTYPES = {
  "float32": pytest.param(np.float32),
  "float64": pytest.param(np.float64, marks=pytest.mark.jax_modes("x64")),
}


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("op", ["add", "mul", "set"])
@pytest.mark.lowest_versions
@pytest.mark.covering_modes
def test_xla_cpu_scatter_is_serial(op, dtype):
  data, target, updates = _serial_case(dtype, op)
  want = _serial_reference(data, target, updates, op)
  if op != "set":
    # Not vacuous: the same updates in another order give other bits.
    order = np.random.default_rng(0).permutation(UPDATES)
    shuffled = _serial_reference(data, target[order], updates[order], op)
    assert not np.array_equal(shuffled, want)
  plain = jax.jit(functools.partial(_plain, op=op))
  got = np.asarray(plain(data, target, updates))
  assert np.array_equal(got, want), BROKEN.format(what=f"jit, {op}")
  # Under vmap: two members of half the updates each, in one scatter.
  half = UPDATES // 2
  batched = jax.jit(jax.vmap(functools.partial(_plain, op=op)))
  got = np.asarray(
    batched(
      np.stack([data, data[::-1]]),
      target.reshape(2, half),
      updates.reshape(2, half),
    )
  )
  for member, start in ((0, data), (1, data[::-1])):
    part = slice(member * half, (member + 1) * half)
    want = _serial_reference(start, target[part], updates[part], op)
    assert np.array_equal(got[member], want), BROKEN.format(what=f"vmap, {op}")


MINMAX_BROKEN = (
  "XLA's CPU float scatter {op} is no longer IEEE 754-2019's {op}imum "
  "({what}). jaxops' CPU min/max (jaxops/_reduce.py, `_native_minmax`) "
  "relies on it: make `has_serial` false for min/max (the integer key of "
  "every other platform) and record the change in docs/design.md#serial-cpu."
)

MINMAX_DTYPES = {
  **DTYPES,
  "bfloat16": pytest.param(jnp.bfloat16),
  "float16": pytest.param(np.float16),
}


def _total_order_reference(data, target, updates, op):
  """`op` over NumPy's integer keys of the floats (-0 < +0); NaN wherever a
  NaN reaches the slot."""
  kind = {2: np.int16, 4: np.int32, 8: np.int64}[updates.dtype.itemsize]

  def key(x):
    bits = x.view(kind)
    return bits ^ ((bits >> (8 * bits.itemsize - 1)) & np.iinfo(kind).max)

  keys = key(data.copy())
  (np.maximum if op == "max" else np.minimum).at(keys, target, key(updates))
  nan = np.isnan(data.astype(np.float32))
  np.logical_or.at(nan, target, np.isnan(updates.astype(np.float32)))
  return key(keys).view(data.dtype), nan


@pytest.mark.parametrize("dtype", MINMAX_DTYPES.values(), ids=MINMAX_DTYPES)
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.lowest_versions
@pytest.mark.covering_modes
def test_xla_cpu_scatter_max_is_ieee(op, dtype):
  # 4M updates into 16 slots, each the signed zeros and values below the
  # max (above the min): every slot's result is a zero, +0 for max where a
  # +0 reaches it (slots 0-7), else -0; one NaN update in each fourth slot.
  rng = np.random.default_rng([UPDATES, SLOTS, op == "max"])
  sign = -1 if op == "max" else 1
  target = rng.integers(0, SLOTS, UPDATES).astype(np.int32)
  choices = np.array([0.0, -0.0, sign * 1.0, sign * 2.0])
  pick = rng.integers(0, 4, UPDATES)
  # Slots 8-15 get one zero only (-0 for max, +0 for min).
  pick = np.where((target >= SLOTS // 2) & (pick == 0), 1, pick)
  if op == "min":
    pick = np.where((target >= SLOTS // 2) & (pick == 1), 0, pick)
  updates = choices[pick].astype(dtype)
  for slot in range(0, SLOTS, 4):
    updates[np.flatnonzero(target == slot)[UPDATES // SLOTS // 2]] = np.nan
  data = np.full(SLOTS, sign * 3.0).astype(dtype)
  want, nan = _total_order_reference(data, target, updates, op)
  # Not vacuous: NaN and both zeros among the results.
  assert nan.any() and set(np.signbit(want[~nan].astype(np.float32))) == {
    False,
    True,
  }
  plain = jax.jit(
    lambda d, t, u: d.at[t].max(u) if op == "max" else d.at[t].min(u)
  )
  got = np.asarray(plain(data, target, updates))
  assert np.array_equal(np.isnan(got.astype(np.float32)), nan), (
    MINMAX_BROKEN.format(op=op, what="a NaN update no longer propagates")
  )
  bits = np.dtype(f"u{data.itemsize}")
  assert np.array_equal(got[~nan].view(bits), want[~nan].view(bits)), (
    MINMAX_BROKEN.format(op=op, what="signed zeros")
  )


# Every scatter whose targets may repeat, as (name, call, args): the paths
# `jaxops._order` switches (float min/max: XLA's float max on CPU, the
# integer key elsewhere).
_RNG = np.random.default_rng(7)
_DATA = _RNG.standard_normal((64, 8)).astype(np.float32)
_ROWS = _RNG.integers(0, 64, (4096, 1))
_ROW_UPDATES = _RNG.standard_normal((4096, 8)).astype(np.float32)
_ELEMENTS = _RNG.integers(0, 64, (4096, 8))
PATHS = {
  "scatter_nd_update-none": lambda d, u: jaxops.scatter_nd_update(d, _ROWS, u),
  **{
    f"scatter_nd_update-{r}": functools.partial(
      lambda d, u, r: jaxops.scatter_nd_update(d, _ROWS, u, reduction=r), r=r
    )
    for r in ("sum", "sub", "prod", "max")
  },
  **{
    f"scatter_elements_update-{r}": functools.partial(
      lambda d, u, r: jaxops.scatter_elements_update(
        d, _ELEMENTS, u, reduction=r
      ),
      r=r,
    )
    for r in ("none", "sum", "prod", "mean", "min")
  },
}


def _fresh(fn):
  # The switch is read when tracing, and jit caches traces by function.
  return jax.jit(lambda d, u: fn(d, u))


def _counts(text):
  return {op: text.count(op) for op in ("sort", "while", "conditional")}


def _exported(fn, platforms):
  exported = jax.export.export(_fresh(fn), platforms=platforms)
  return exported(_DATA, _ROW_UPDATES)


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.covering_modes
def test_cpu_program_is_the_plain_scatter(name):
  fn = PATHS[name]
  # The plain scatter, whose result depends on XLA:CPU's order ...
  assert order_dependent_hlo(_exported(fn, ("cpu",)).mlir_module())
  # ... alone: no winner search, sort, loop or repeat test is compiled.
  compiled = _fresh(fn).lower(_DATA, _ROW_UPDATES).compile().as_text()
  assert _counts(compiled) == {"sort": 0, "while": 0, "conditional": 0}


@pytest.mark.parametrize(
  ("reduction", "use_init_val"),
  [("mean", True), ("mean", False), ("sum", True), ("sum", False)],
)
@pytest.mark.covering_modes
def test_cpu_float_sums_and_means_are_one_scatter(reduction, use_init_val):
  # Each target's sum and count in one scatter of (update, 1) pairs: a
  # mean's second scatter read the targets again, and without the initial
  # value another found the targeted rows (docs/design.md#one-scatter-mean).
  fn = lambda d, u: jaxops.scatter_elements_update(
    d, _ELEMENTS, u, reduction=reduction, use_init_val=use_init_val
  )
  compiled = _fresh(fn).lower(_DATA, _ROW_UPDATES).compile().as_text()
  assert compiled.count(" scatter(") == 1, compiled


@pytest.mark.parametrize(
  ("dtype", "updates", "use_init_val", "scatters"),
  [
    # Counts up to updates + 1 with the initial value, the float's last
    # exact integer 2**24 (float32). Beyond, sums and integer counts apart,
    # and without the initial value a third scatter finds the targeted rows.
    (np.float32, 2**24 - 1, True, 1),
    (np.float32, 2**24, True, 2),
    (np.float32, 2**24, False, 1),
    (np.float32, 2**24 + 1, False, 3),
    # XLA:CPU scatters narrower floats through float32: sums and counts
    # apart, and the targeted rows for the bits of the others.
    (np.float16, 8, True, 3),
  ],
)
def test_cpu_mean_counts_in_a_column_only_where_they_are_exact(
  dtype, updates, use_init_val, scatters
):
  fn = lambda d, i, u: jaxops.scatter_elements_update(
    d, i, u, reduction="mean", use_init_val=use_init_val
  )
  shapes = [
    jax.ShapeDtypeStruct((64,), dtype),
    jax.ShapeDtypeStruct((updates,), np.int32),
    jax.ShapeDtypeStruct((updates,), dtype),
  ]
  lowered = jax.jit(fn).lower(*shapes).as_text()
  assert lowered.count('"stablehlo.scatter"(') == scatters


_TUPLES = _RNG.integers(-8, 8, (4096, 2))
_TUPLE_UPDATES = _RNG.standard_normal(4096).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("mode", ["drop", "clip"])
def test_cpu_program_prepares_tuples_in_one_loop(reduction, mode):
  # The wrap, the range test and the linear row of (n, 2) tuples are one
  # fusion: a reduction over the tuples' last axis split them into two,
  # which cost 10-20% of a donated write (docs/design.md#index-fusion).
  fn = lambda d, t, u: jaxops.scatter_nd_update(
    d, t, u, reduction=reduction, mode=mode
  )
  compiled = jax.jit(fn).lower(_DATA, _TUPLES, _TUPLE_UPDATES).compile()
  entry = compiled.as_text().split("ENTRY", 1)[1]
  computed = re.findall(
    r"= [su]\d+\[([\d,]*)\]\S* (?!parameter|constant|bitcast)\w+", entry
  )
  assert computed == ["4096,1"], entry


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.covering_modes
def test_cpu_serial_write_prepares_rows_on_one_thread(k):
  # XLA:CPU splits a loop over threads when it counts more operations than
  # bytes; the default's rows take at most as many, so below 256 KiB of rows
  # the loop stays on one thread, whose hand-off cost more than the loop
  # (docs/design.md#index-fusion).
  fn = lambda d, t, u: jaxops.scatter_nd_update(d, t, u)
  tuples, updates = _TUPLES[:, :k], _TUPLE_UPDATES
  if k == 1:
    updates = np.broadcast_to(updates[:, None], (4096, 8))
  compiled = jax.jit(fn).lower(_DATA, tuples, updates).compile()
  entry = compiled.as_text().split("ENTRY", 1)[1]
  rows = [
    line
    for line in entry.splitlines()
    if re.search(r"= s\d+\[4096,1\]\S* fusion\(", line)
  ]
  assert len(rows) == 1, entry
  assert "outer_dimension_partitions" not in rows[0], rows[0]


@pytest.mark.parametrize(
  ("dtype", "sizes", "unsigned"),
  [
    (np.int32, (4096, 4096), True),
    (np.int32, (2**31 - 1,), True),
    # Rows past the end reach twice their number: beyond 2**31 - 1 rows
    # int32 indices take the general form (x64 rows of int64).
    (np.int32, (46341, 46341), False),
    (np.int64, (46341, 46341), True),
    (np.int16, (64, 64), False),
    (np.uint32, (64, 64), False),
  ],
)
def test_unsigned_rows_only_where_their_type_holds_twice_the_rows(
  dtype, sizes, unsigned
):
  from jaxops import _scatter_nd_update

  applies = _scatter_nd_update._unsigned_rows_apply(
    np.zeros((2, len(sizes)), dtype), sizes, lax.GatherScatterMode.FILL_OR_DROP
  )
  assert applies == unsigned


# Updates with more than one batch dim: ScatterElementsUpdate's elements of
# 2-D data, ScatterNDUpdate with indices of rank 3.
_BATCH_ROWS = _RNG.integers(0, 64, (64, 64, 1))
_BATCH_UPDATES = _RNG.standard_normal((64, 64, 8)).astype(np.float32)
_BATCHED = {
  **{
    f"scatter_nd_update-{r}": (
      functools.partial(
        lambda d, u, r: jaxops.scatter_nd_update(
          d, _BATCH_ROWS, u, reduction=r
        ),
        r=r,
      ),
      _BATCH_UPDATES,
    )
    for r in ("none", "sum", "prod", "max")
  },
  **{
    name: (fn, _ROW_UPDATES)
    for name, fn in PATHS.items()
    if name.startswith("scatter_elements_update")
  },
}


def _moves_only(text):
  """The computations of an optimized HLO module that only move data."""
  moving = set()
  for name, body in re.findall(r"^%(\S+) .*? \{\n(.*?)\n\}", text, re.M | re.S):
    ops = set(re.findall(r"= \w+\[[^\]]*\]\S* ([\w-]+)\(", body))
    if ops <= {"parameter", "bitcast", "copy", "transpose"}:
      moving.add(name)
  return moving


@pytest.mark.parametrize("name", _BATCHED)
@pytest.mark.covering_modes
def test_cpu_program_reads_updates_where_they_are(name):
  # Found in the field: `.at[]` inserts the row dimension, which XLA puts
  # back with a reshape of updates that XLA:CPU laid out as a copy where
  # updates had more than one batch dim (64 MiB more per call for the
  # bench's graph layer, a third of its time; docs/design.md#canonical-scatter).
  # The program holds no fusion that only moves data.
  fn, updates = _BATCHED[name]
  compiled = _fresh(fn).lower(_DATA, updates).compile().as_text()
  called = re.findall(r"calls=%([\w.-]+)", compiled.split("ENTRY", 1)[1])
  assert set(called).isdisjoint(_moves_only(compiled)), compiled


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", PATHS)
@pytest.mark.covering_modes
def test_export_carries_both_paths(name):
  fn = PATHS[name]
  for platform in ("cuda", "tpu"):
    text = _exported(fn, (platform,)).mlir_module()
    assert order_dependent_hlo(text) == [], platform
  both = _exported(fn, ("cpu", "cuda", "tpu"))
  assert order_dependent_hlo(both.mlir_module())  # The CPU branch.
  assert_same(both.call(_DATA, _ROW_UPDATES), fn(_DATA, _ROW_UPDATES))


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("name", PATHS)
@pytest.mark.covering_modes
def test_switch_forces_the_constructed_path_on_cpu(name, monkeypatch):
  fn = PATHS[name]
  serial = np.asarray(fn(_DATA, _ROW_UPDATES))
  monkeypatch.setenv(_order.ENV_VAR, "constructed")
  lowered = _fresh(fn).lower(_DATA, _ROW_UPDATES)
  assert order_dependent_hlo(lowered.as_text()) == []
  # Runs of 64 updates per slot: both paths are the serial order.
  assert_same(lowered.compile()(_DATA, _ROW_UPDATES), serial)


@pytest.mark.parametrize("value", ["", "platform"])
def test_switch_empty_or_platform_is_the_default(value, monkeypatch):
  monkeypatch.setenv(_order.ENV_VAR, value)
  lowered = _fresh(PATHS["scatter_nd_update-sum"]).lower(_DATA, _ROW_UPDATES)
  assert order_dependent_hlo(lowered.as_text())


def test_switch_rejects_unknown_values(monkeypatch):
  monkeypatch.setenv(_order.ENV_VAR, "serial")
  with pytest.raises(ValueError, match="JAXOPS_SCATTER_ORDER='serial'"):
    jaxops.scatter_nd_update(_DATA, _ROWS, _ROW_UPDATES)


@pytest.mark.parametrize("reduction", ["sum", "prod"])
def test_cpu_reductions_are_serial_beyond_a_chunk(reduction):
  # 5000 updates into one slot: longer than the constructed path's chunk,
  # still the serial order on CPU.
  rng = np.random.default_rng(3)
  data = rng.standard_normal(2).astype(np.float32)
  indices = np.zeros((5000, 1), np.int32)
  if reduction == "prod":
    updates = (1 + rng.standard_normal(5000) * 1e-2).astype(np.float32)
  else:
    updates = (rng.standard_normal(5000) * 10).astype(np.float32)
  want = reductions.np_scatter_nd_reduce(data, indices, updates, reduction)
  reduce = lambda d, u: jaxops.scatter_nd_update(
    d, indices, u, reduction=reduction
  )
  assert_same(reduce(data, updates), want)
  assert_same(jax.jit(reduce)(data, updates), want)


_FOLDABLE = {
  "scatter_nd_update-sum": lambda d, i, u: jaxops.scatter_nd_update(
    d, i[:, :1], u, reduction="sum"
  ),
  "scatter_elements_update-sum": lambda d, i, u: jaxops.scatter_elements_update(
    d, i, u, reduction="sum"
  ),
}


@pytest.mark.parametrize("name", _FOLDABLE)
@pytest.mark.usefixtures("constructed")
@pytest.mark.covering_modes
def test_constant_indices_stay_a_runtime_computation(name):
  # Found in the field: with the indices a jitted function's constants (a
  # ported model's initializers), XLA constant-folded the constructed path
  # in its HLO evaluator: 4.3 s to compile 32k indices, 6.5 s for 131k
  # (docs/design.md#constant-indices).
  rng = np.random.default_rng(5)
  data = rng.standard_normal((8, 3)).astype(np.float32)
  indices = rng.integers(0, 8, (64, 3))
  updates = rng.standard_normal((64, 3)).astype(np.float32)
  fn = _FOLDABLE[name]
  closed = jax.jit(lambda d, u: fn(d, indices, u))
  assert "sort(" in closed.lower(data, updates).compile().as_text()
  assert_same(closed(data, updates), jax.jit(fn)(data, indices, updates))


_FOLDED_ON_CPU = {
  "scatter_elements_update-none": lambda d, i, u: (
    jaxops.scatter_elements_update(d, i, u)
  ),
  "scatter_elements_update-mean": lambda d, i, u: (
    jaxops.scatter_elements_update(d, i, u, reduction="mean")
  ),
  "scatter_nd_update-prod-grad": lambda d, i, u: jax.grad(
    lambda d, u: jaxops.scatter_nd_update(
      d, i[:, :1], u, reduction="prod"
    ).sum(),
    (0, 1),
  )(d, u),
}


@pytest.mark.parametrize("name", _FOLDED_ON_CPU)
@pytest.mark.covering_modes
def test_constant_indices_stay_a_runtime_computation_on_cpu(name):
  # Found in the field: closed-over indices of (200000, 16) took
  # ScatterElementsUpdate 16-38 s to compile on CPU, XLA folding its
  # targets (a reduce over the tuples) and the mean's counts, and
  # ScatterNDUpdate's product derivative its sort, in the HLO evaluator
  # (docs/design.md#constant-indices). The program with constant indices
  # is the one with indices passed in: none of its fusions folded away.
  rng = np.random.default_rng(6)
  data = rng.standard_normal((8, 3)).astype(np.float32)
  indices = rng.integers(0, 8, (64, 3))
  updates = rng.uniform(0.5, 1.5, (64, 3)).astype(np.float32)
  fn = _FOLDED_ON_CPU[name]
  closed = jax.jit(lambda d, u: fn(d, indices, u))
  passed = jax.jit(fn)
  fusions = lambda lowered: lowered.compile().as_text().count(" fusion(")
  assert fusions(closed.lower(data, updates)) == fusions(
    passed.lower(data, indices, updates)
  )
  for got, want in zip(
    jax.tree.leaves(closed(data, updates)),
    jax.tree.leaves(passed(data, indices, updates)),
  ):
    assert_same(got, want)


def _scatter_index_types(text):
  """The element type of every scatter's indices in an optimized HLO
  module (instruction names are unique in a module)."""
  types = dict(re.findall(r"%([\w.-]+) = (\w+)\[", text))
  operands = re.findall(r" scatter\(%[\w.-]+, %([\w.-]+),", text)
  return sorted({types[name] for name in operands})


_NARROW_FORMS = {
  "scatter_nd_update-sum": lambda d, i, u: jaxops.scatter_nd_update(
    d, i[:, None], u, reduction="sum"
  ),
  "scatter_nd_update-sum-grad": lambda d, i, u: jax.value_and_grad(
    lambda d, u: jaxops.scatter_nd_update(
      d, i[:, None], u, reduction="sum"
    ).sum(),
    (0, 1),
  )(d, u),
  "scatter_nd_update-max": lambda d, i, u: jaxops.scatter_nd_update(
    d, i[:, None], u, reduction="max"
  ),
  "scatter_elements_update-mean": lambda d, i, u: (
    jaxops.scatter_elements_update(d, i, u, reduction="mean")
  ),
}


@pytest.mark.parametrize(
  ("slots", "index_type"), [(127, "s8"), (32767, "s16"), (32768, "s32")]
)
@pytest.mark.parametrize("name", _NARROW_FORMS)
@pytest.mark.covering_modes
def test_cpu_reductions_scatter_narrow_targets(name, slots, index_type):
  # One-element rows: int32 targets were half of what the scatter read,
  # and fwd+bwd of 1M updates into 64 slots took 1.02-1.05x plain
  # autodiff; int8 targets, 0.88-0.91x (docs/design.md#narrow-targets).
  shapes = [
    jax.ShapeDtypeStruct((slots,), np.float32),
    jax.ShapeDtypeStruct((4096,), np.int32),
    jax.ShapeDtypeStruct((4096,), np.float32),
  ]
  text = jax.jit(_NARROW_FORMS[name]).lower(*shapes).compile().as_text()
  assert _scatter_index_types(text) == [index_type], text


@pytest.mark.parametrize(
  ("reduction", "elements"),
  [("sum", False), ("max", False), ("mean", True), ("prod", True)],
)
@pytest.mark.scatter_orders
@pytest.mark.lowest_versions
def test_vmap_beyond_the_narrow_targets_range(
  reduction, elements, scatter_order
):
  # 300 members of 64 slots: batched, the targets' member coordinates pass
  # what int8 holds; each member equals its NumPy reference.
  rng = np.random.default_rng(11)
  batch, slots, n = 300, 64, 40
  data = rng.standard_normal((batch, slots)).astype(np.float32)
  indices = rng.integers(-slots - 4, slots + 4, (batch, n))
  updates = rng.uniform(0.5, 1.5, (batch, n)).astype(np.float32)
  if elements:
    call = lambda d, i, u: jaxops.scatter_elements_update(
      d, i, u, reduction=reduction
    )
    reference = reductions.np_scatter_elements
  else:
    call = lambda d, i, u: jaxops.scatter_nd_update(
      d, i[:, None], u, reduction=reduction
    )
    reference = lambda d, i, u, reduction: reductions.np_scatter_nd_reduce(
      d, i[:, None], u, reduction
    )
  got = np.asarray(jax.jit(jax.vmap(call))(data, indices, updates))
  for member in range(batch):
    want = reference(
      data[member], indices[member], updates[member], reduction=reduction
    )
    assert_same(got[member], want, f"member {member}")


_ROW_GATHER_GRADS = {
  "gather-rows": lambda d, i: jaxops.gather(d, i[..., 0], 0),
  "gather_nd-rows": lambda d, i: jaxops.gather_nd(d, i),
  "gather_nd-elements": lambda d, i: jaxops.gather_nd(
    d.reshape(8, 8, 8), jnp.concatenate([i, i], -1)
  ),
}


@pytest.mark.parametrize("name", _ROW_GATHER_GRADS)
@pytest.mark.covering_modes
def test_cpu_gather_gradient_reads_the_cotangent_where_it_is(name):
  # Found in the bench: the gradient of an embedding lookup with ids of
  # shape (64, 512) copied its 32 MiB cotangent before the scatter-add (a
  # reshape XLA inserts, laid out as a copy, as for the scatters above);
  # the tangent gather of rows has the form XLA emits as it is, fwd+bwd
  # 0.84x plain autodiff of jnp.take (docs/design.md#row-transpose).
  fn = _ROW_GATHER_GRADS[name]
  loss = lambda d, i, w: jnp.sum(fn(d, i) * w)
  indices = _BATCH_ROWS % 8
  out = jax.eval_shape(fn, _DATA, indices)
  w = np.ones(out.shape, np.float32)
  compiled = jax.jit(jax.grad(loss)).lower(_DATA, indices, w).compile()
  text = compiled.as_text()
  called = re.findall(r"calls=%([\w.-]+)", text.split("ENTRY", 1)[1])
  assert set(called).isdisjoint(_moves_only(text)), text
