"""The four operators on 8 devices: sharded results, shardings, collectives.

Each `Layout` jits an operator with its inputs placed by `NamedSharding`s on a
`Mesh` of 8 CPU devices (tests/conftest.py asks XLA for them before JAX starts
its CPU backend) and compares it with the same operator jitted unsharded on
the first of them. One test per check, parametrized over the layouts it
applies to (ids are the layout names):

* `test_equal`: the sharded result equals the unsharded one exactly;
* `test_sharding`: the output carries the expected sharding (the input's, on
  the dims the operator passes through);
* `test_no_collectives` (communication-free layouts): the compiled HLO
  contains no all-gather, all-to-all, all-reduce, reduce-scatter or
  collective-permute;
* `test_collectives` (layouts that do need communication): the compiled HLO
  contains exactly the collectives docs/sharding.md documents for that layout
  (`test_compile_options_keep_collectives`: and so does a compile with XLA's
  default options, see `COMPILER_OPTIONS`);
* `test_grad_*`: the same for the gradient of `sum(weights * op(...))` with
  respect to the float arguments (weights sharded like the output): the
  gradient of each argument keeps that argument's sharding. The gradient with
  respect to a *replicated* argument is a sum over devices, so there
  `test_grad_collectives` expects exactly one all-reduce. (Write the objective
  as `sum(w * y)`, not `vdot(w, y)`: vdot flattens both arrays, and flattening
  an array sharded on an inner dim costs an all-gather.)

The `shard_map/*` cases run the operators inside `jax.shard_map` on
per-device blocks (including the vocabulary-parallel lookup and update of a
row-sharded table, with local indices and the out-of-range `mode`s) and go
through `test_equal`, `test_collectives` and `test_grad_equal` against the
global operator.

Data and weights are small integers stored as float32, so every sum is exact
in any order and the comparisons are exact in both x64 modes. Each case is
compiled and run once per x64 mode (`_run`), by whichever of its tests comes
first.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import zlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxops
from jaxops import _order
from tests.support import generators as gen
from tests.support import modes
from tests.support.asserts import assert_same

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

DEVICES = 8
COLLECTIVE_RE = re.compile(
  r"\b(all-gather|all-to-all|all-reduce|reduce-scatter|collective-permute)"
  r"(?:-start)?\("
)

# Meshes by name: "x" is a 1-D mesh of 8 devices; "batch,model" is 4 x 2.
MESH_AXES = {"x": (("x",), (8,)), "batch,model": (("batch", "model"), (4, 2))}


def make_mesh(name: str) -> Mesh:
  """The named mesh over the first 8 CPU devices (on any host)."""
  devices = jax.devices("cpu")
  if len(devices) < DEVICES:
    pytest.fail(
      f"need {DEVICES} CPU devices, have {len(devices)}: "
      "tests/conftest.py asks for them, which only works before "
      "JAX's CPU backend starts"
    )
  axes, shape = MESH_AXES[name]
  return Mesh(np.array(devices[:DEVICES]).reshape(shape), axes)


# Every program here compiles with XLA's backend (LLVM) optimizations and its
# CPU fusion emitters off, which is much faster. Both act after SPMD
# partitioning, on how the partitioned program is fused and turned into
# machine code, so the collectives the tests read are those of a default
# compile (`test_compile_options_keep_collectives` checks it where there are
# collectives).
COMPILER_OPTIONS = {
  "xla_backend_optimization_level": 0,
  "xla_cpu_use_fusion_emitters": False,
}


def collectives(hlo_text: str) -> list[str]:
  """The distinct collective op kinds in compiled HLO text, sorted."""
  return sorted(set(COLLECTIVE_RE.findall(hlo_text)))


def ints_as_floats(rng, shape):
  """Small integers stored as float32: sums of them are exact in any order."""
  return rng.integers(-9, 10, size=shape).astype(np.float32)


def unique_rows(rng, size, count):
  """`count` distinct indices into a dim of `size`, as [count, 1] tuples."""
  return rng.choice(size, count, replace=False)[:, None]


@dataclasses.dataclass(frozen=True)
class Layout:
  """One operator call with its input shardings and what to expect.

  `collectives` is None for a communication-free layout, else the sorted
  collectives XLA emits for it (as documented in docs/sharding.md's table).
  """

  name: str
  fn: Callable[..., jax.Array]
  make_args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
  in_specs: tuple[P, ...]
  out_spec: P | None
  mesh: str = "x"
  diff_argnums: tuple[int, ...] = (0,)
  collectives: tuple[str, ...] | None = None
  grad_collectives: tuple[str, ...] = ()

  @property
  def global_fn(self) -> Callable[..., jax.Array]:
    return self.fn

  @property
  def grad_argnums(self) -> tuple[int, ...]:
    """The arguments whose gradients are checked (communication-free only)."""
    return self.diff_argnums if self.collectives is None else ()

  def partitioned(self, mesh: Mesh) -> Callable[..., jax.Array]:
    del mesh  # jit partitions `fn` by its inputs' shardings
    return self.fn


# One function per attribute value (cached), so that cases sharing one share
# jit's compilation cache for their unsharded references.
@functools.cache
def _gather_nd(batch_dims):
  return lambda d, i: jaxops.gather_nd(d, i, batch_dims=batch_dims)


@functools.cache
def _gather_elements(axis):
  return lambda d, i: jaxops.gather_elements(d, i, axis=axis)


@functools.cache
def _gather(axis, batch_dims):
  return lambda d, i: jaxops.gather(d, i, axis, batch_dims)


def _slice_columns(d):
  return jaxops.slice(d, [-1, 0], [-99, 99], [-2, 1], [1, 0])


def _scatter(d, i, u):
  return jaxops.scatter_nd_update(d, i, u)


def _gather_args(
  data_shape, sizes, indices_shape, indices=gen.random_indices, **options
):
  """`make_args` of a gather: data, then `indices(rng, sizes, indices_shape,
  **options)`."""
  return lambda r: (
    ints_as_floats(r, data_shape),
    indices(r, sizes, indices_shape, **options),
  )


def _scatter_args(data_shape, count):
  """`make_args` of a ScatterNDUpdate of `count` distinct rows of data."""
  return lambda r: (
    ints_as_floats(r, data_shape),
    unique_rows(r, data_shape[0], count),
    ints_as_floats(r, (count, *data_shape[1:])),
  )


def _scatter_constructed(d, i, u):
  with _order.forced_constructed():
    return jaxops.scatter_nd_update(d, i, u)


def _scatter_unique(d, i, u):
  return jaxops.scatter_nd_update(d, i, u, unique_indices=True)


def _one_array(shape):
  """`make_args` of a slicing layout: one array of `shape`."""
  return lambda r: (ints_as_floats(r, shape),)


def _row_sharded(shape):
  """`make_args`, `in_specs` and `out_spec` of a slice of one array of
  `shape` that keeps its rows whole: sharded on "x" in and out."""
  return _one_array(shape), (P("x"),), P("x")


LAYOUTS = [
  # ---- communication-free ------------------------------------------------
  Layout(
    "gather_nd/batch_dims1_sharded_batch",
    _gather_nd(1),
    _gather_args((16, 6, 5), (6,), (16, 3)),
    (P("x"), P("x")),
    P("x"),
  ),
  Layout(
    "gather_nd/batch_dims2_2d_mesh",
    _gather_nd(2),
    _gather_args((8, 4, 6, 3), (6,), (8, 4, 5)),
    (P("batch", "model"), P("batch", "model")),
    P("batch", "model"),
    mesh="batch,model",
  ),
  Layout(
    "gather_nd/batch_dims1_sharded_batch_and_trailing",
    _gather_nd(1),
    _gather_args((8, 6, 4), (6,), (8, 3)),
    (P("batch", None, "model"), P("batch")),
    P("batch", None, "model"),
    mesh="batch,model",
  ),
  Layout(
    "gather_nd/table_sharded_on_slice_dim",
    _gather_nd(0),
    _gather_args((10, 16), (10,), (7,)),
    (P(None, "x"), P()),
    P(None, "x"),
  ),
  Layout(
    "gather_nd/replicated_table_sharded_indices",
    _gather_nd(0),
    _gather_args((10, 3), (10,), (16, 2)),
    (P(), P("x")),
    P("x"),
    grad_collectives=("all-reduce",),
  ),
  Layout(
    "gather/batch_dims1_sharded_batch",
    _gather(1, 1),
    _gather_args((16, 6, 5), 6, (16, 3), indices=gen.half_out_of_range),
    (P("x"), P("x")),
    P("x"),
  ),
  Layout(
    "gather/table_sharded_on_slice_dim",
    _gather(0, 0),
    _gather_args((10, 16), 10, (7,), indices=gen.half_out_of_range),
    (P(None, "x"), P()),
    P(None, "x"),
  ),
  Layout(
    "slice/dim_kept_whole",
    _slice_columns,
    *_row_sharded((16, 6)),
  ),
  Layout(
    "gather_elements/axis1_sharded_dim0",
    _gather_elements(1),
    _gather_args((16, 6), 6, (16, 9)),
    (P("x"), P("x")),
    P("x"),
  ),
  Layout(
    "gather_elements/axis0_2d_mesh_dims1_2",
    _gather_elements(0),
    _gather_args((5, 4, 6), 5, (7, 4, 6)),
    (P(None, "batch", "model"), P(None, "batch", "model")),
    P(None, "batch", "model"),
    mesh="batch,model",
  ),
  Layout(
    "scatter_nd_update/slices_sharded_trailing",
    _scatter,
    _scatter_args((6, 5, 16), 3),
    (P(None, None, "x"), P(), P(None, None, "x")),
    P(None, None, "x"),
    diff_argnums=(0, 2),
  ),
  Layout(
    "scatter_nd_update/elements_k2_sharded_trailing",
    _scatter,
    lambda r: (
      ints_as_floats(r, (4, 5, 8)),
      np.array([[0, 1], [3, -1], [-2, 2], [0, 1]]),
      ints_as_floats(r, (4, 8)),
    ),
    (P(None, None, "x"), P(), P(None, "x")),
    P(None, None, "x"),
    diff_argnums=(0, 2),
  ),
  Layout(
    "scatter_nd_update/rows_sharded_replicated_updates",
    _scatter,
    _scatter_args((16, 5), 6),
    (P("x"), P(), P()),
    P("x"),
    diff_argnums=(0, 2),
    grad_collectives=("all-reduce",),
  ),
  Layout(
    "strided_slice/cols_step2_sharded_rows",
    lambda d: jaxops.strided_slice(
      d, [0, 1], [0, 10], [1, 2], begin_mask=[1, 0], end_mask=[1, 0]
    ),
    *_row_sharded((16, 12)),
  ),
  Layout(
    "strided_slice/stride_divides_shard_of_sharded_dim",
    # [1::2] of 32 rows in blocks of 4: each block keeps its own rows.
    lambda d: jaxops.strided_slice(d, [1], [0], [2], end_mask=[1]),
    *_row_sharded((32, 4)),
  ),
  Layout(
    "strided_slice/shrink_reverse_2d_mesh",
    # [2, ..., ::-1] on [4, 8, 6, 3]: dims 1 and 2 pass through.
    lambda d: jaxops.strided_slice(
      d,
      [2, 0, 0],
      [0, 0, 0],
      [1, 1, -1],
      begin_mask=[0, 0, 1],
      end_mask=[0, 0, 1],
      shrink_axis_mask=[1, 0, 0],
      ellipsis_mask=[0, 1, 0],
    ),
    _one_array((4, 8, 6, 3)),
    (P(None, "batch", "model"),),
    P("batch", "model"),
    mesh="batch,model",
  ),
  Layout(
    "strided_slice/new_axis_sharded_kept_dim",
    lambda d: jaxops.strided_slice(
      d,
      [0, 0, 1],
      [0, 0, 5],
      [1, 1, 1],
      begin_mask=[1, 0, 0],
      end_mask=[1, 0, 0],
      new_axis_mask=[0, 1, 0],
    ),
    *_row_sharded((16, 6)),
  ),
  # ---- layouts that need communication -----------------------------------
  Layout(
    "gather_nd/table_sharded_on_indexed_dim",
    _gather_nd(0),
    _gather_args((16, 5), (16,), (7,)),
    (P("x"), P()),
    None,
    collectives=("all-reduce",),
  ),
  Layout(
    "gather_elements/sharded_on_axis",
    _gather_elements(0),
    _gather_args((16, 8), 16, (5, 8)),
    (P("x"), P()),
    None,
    collectives=("all-reduce",),
  ),
  *[
    Layout(
      f"scatter_nd_update/indices_and_updates_sharded{variant}",
      fn,
      _scatter_args((32, 5), 8),
      (P("x"), P("x"), P("x")),
      None,
      collectives=found,
    )
    for variant, fn, found in [
      # On CPU, XLA's serial scatter: repeated rows need nothing more.
      ("", _scatter, ("all-gather",)),
      # Every other platform's path: the winner table all-reduces (a table
      # this small has no order test in front, which would compare
      # neighbours across the shard boundary).
      ("_constructed", _scatter_constructed, ("all-gather", "all-reduce")),
      ("_unique", _scatter_unique, ("all-gather",)),
    ]
  ],
  # Slices of 32 rows sharded on the sliced dim.
  *[
    Layout(
      f"strided_slice/{name}",
      fn,
      _one_array((32, 4)),
      (P("x"),),
      None,
      collectives=found,
    )
    for name, fn, found in [
      (
        "offset_slice_of_sharded_dim",
        lambda d: jaxops.strided_slice(d, [2], [18], [1]),
        ("collective-permute",),
      ),
      (
        "reverse_of_sharded_dim",
        lambda d: jaxops.strided_slice(
          d, [0], [0], [-1], begin_mask=[1], end_mask=[1]
        ),
        ("collective-permute",),
      ),
      (
        # 28 rows do not split into 8 blocks: the result is replicated.
        "uneven_slice_of_sharded_dim",
        lambda d: jaxops.strided_slice(d, [4], [32], [1]),
        ("all-gather", "collective-permute"),
      ),
    ]
  ],
]


def _block_local(ids, rows):
  """Global row ids -> indices into this device's block of `rows` rows.

  Ids outside the block become `rows` (out of range), never negative: the
  operators read a negative index from the end of the block.
  """
  offset = (jax.lax.axis_index("x") * rows).astype(ids.dtype)
  local = ids - offset
  return jnp.where((local < 0) | (local >= rows), rows, local)


def _vocab_parallel_lookup(table_block, ids):
  """Rows of a row-sharded table at global `ids`, inside shard_map.

  Each device gathers the ids that fall in its block (local index = id -
  offset); the others read the fill value 0 (`mode="fill"`), and a psum adds
  the one real row per id -- Megatron's vocabulary-parallel embedding.
  """
  local = jaxops.gather_nd(
    table_block,
    _block_local(ids, table_block.shape[0]),
    mode="fill",
    fill_value=0,
  )
  return jax.lax.psum(local, "x")


def _vocab_parallel_update(table_block, ids, new_rows):
  """Writes `new_rows` at global row `ids` of a row-sharded table, locally.

  Tuples outside the block are dropped by `mode="drop"`, so no device talks
  to another. Ids must be non-negative (global negative ids are not
  translated here).
  """
  local = _block_local(ids, table_block.shape[0])
  return jaxops.scatter_nd_update(table_block, local, new_rows, mode="drop")


@dataclasses.dataclass(frozen=True)
class ShardMapCase:
  """`block_fn` under shard_map must equal `global_fn` on the whole arrays
  (`whole_fn`, or `block_fn` itself where it is the operator).

  `collectives` are the ones the compiled shard_map program must contain
  (exactly); `grad_argnums` the arguments whose gradients must be equal.
  """

  name: str
  block_fn: Callable[..., jax.Array]
  make_args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
  in_specs: tuple[P, ...]
  out_spec: P
  collectives: tuple[str, ...] = ()
  grad_argnums: tuple[int, ...] = (0,)
  mesh: str = "x"
  # Also run at the lowest declared jax (.ci/run): shard_map's types of
  # custom primitives' results changed between versions (`_common.vary_alike`).
  lowest_versions: bool = False
  whole_fn: Callable[..., jax.Array] | None = None

  @property
  def global_fn(self) -> Callable[..., jax.Array]:
    return self.block_fn if self.whole_fn is None else self.whole_fn

  def partitioned(self, mesh: Mesh) -> Callable[..., jax.Array]:
    return jax.shard_map(
      self.block_fn, mesh=mesh, in_specs=self.in_specs, out_specs=self.out_spec
    )


def _scatter_sum(d, i, u):
  return jaxops.scatter_nd_update(d, i, u, reduction="sum")


def _segment_sums(d, i, u):
  return jaxops.scatter_elements_update(d, i, u, 1, reduction="sum")


def _segment_reduce(reduction):
  return functools.partial(
    jaxops.scatter_elements_update,
    axis=1,
    reduction=reduction,
    use_init_val=False,
  )


def _small_segments(r):
  # Values in [-2, 2], at most 6 per slot: every product is exact.
  return (
    r.integers(-2, 3, (DEVICES, 10)).astype(np.float32),
    r.integers(0, 10, (DEVICES, 6)).astype(np.int32),
    r.integers(-2, 3, (DEVICES, 6)).astype(np.float32),
  )


def _ascending_segments(r):
  # Enough updates per block that the fold tests whether they ascend
  # (docs/design.md#presorted): each device's block skips the sort.
  n = jaxops._sort.PRESORTED_TEST_MIN
  return (
    ints_as_floats(r, (DEVICES, 40)),
    np.sort(r.integers(0, 40, (DEVICES, n)), axis=1).astype(np.int32),
    ints_as_floats(r, (DEVICES, n)),
  )


def _blockwise(name: str, layout: str) -> ShardMapCase:
  """The communication-free layout's call, arrays and shardings, the
  operator run on each device's blocks."""
  (of,) = [case for case in LAYOUTS if case.name == layout]
  return ShardMapCase(name, of.fn, of.make_args, of.in_specs, of.out_spec)


SHARD_MAP_CASES = [
  _blockwise(
    "shard_map/gather_nd_batch_dims1", "gather_nd/batch_dims1_sharded_batch"
  ),
  _blockwise(
    "shard_map/gather_elements_axis1", "gather_elements/axis1_sharded_dim0"
  ),
  _blockwise(
    "shard_map/scatter_nd_update_trailing",
    "scatter_nd_update/slices_sharded_trailing",
  ),
  ShardMapCase(
    "shard_map/scatter_nd_sum_trailing",
    _scatter_sum,
    lambda r: (
      ints_as_floats(r, (6, 16)),
      r.integers(0, 6, (9, 1)).astype(np.int32),  # repeated rows
      ints_as_floats(r, (9, 16)),
    ),
    (P(None, "x"), P(), P(None, "x")),
    P(None, "x"),
    grad_argnums=(0, 2),
    lowest_versions=True,
  ),
  *[
    ShardMapCase(
      f"shard_map/segment_{name}",
      fn,
      make_args,
      (P("x"), P("x"), P("x")),
      P("x"),
      grad_argnums=(0, 2),
      lowest_versions=True,
    )
    for name, fn, make_args in [
      ("sums_ascending", _segment_sums, _ascending_segments),
      ("sum_no_init", _segment_reduce("sum"), _small_segments),
      ("prod_no_init", _segment_reduce("prod"), _small_segments),
      ("mean_no_init", _segment_reduce("mean"), _small_segments),
    ]
  ],
  ShardMapCase(
    "shard_map/strided_slice_rows",
    lambda d: jaxops.strided_slice(
      d, [0, -1], [0, 0], [1, -3], begin_mask=[1, 0], end_mask=[1, 1]
    ),
    *_row_sharded((16, 10)),
  ),
  ShardMapCase(
    "shard_map/vocab_parallel_lookup",
    _vocab_parallel_lookup,
    _gather_args((32, 5), (32,), (12,), negative=False),
    (P("x"), P()),
    P(),
    collectives=("all-reduce",),
    whole_fn=_gather_nd(0),
  ),
  # A bfloat16 gather moves bits (jaxops/_bits.py) in a primitive whose
  # result varies with the sharded indices, not with the replicated data.
  ShardMapCase(
    "shard_map/bfloat16_gather_replicated_data",
    lambda d, i: jaxops.gather(d, i, 1).astype(np.float32),
    lambda r: (
      ints_as_floats(r, (3, 4)).astype(jnp.bfloat16),
      r.integers(-4, 4, (DEVICES,)).astype(np.int32),
    ),
    (P(), P("x")),
    P(None, "x"),
  ),
  ShardMapCase(
    "shard_map/vocab_parallel_update",
    _vocab_parallel_update,
    _scatter_args((32, 5), 9),
    (P("x"), P(), P()),
    P("x"),
    whole_fn=_scatter,
  ),
]

Case = Layout | ShardMapCase

FREE = [layout for layout in LAYOUTS if layout.collectives is None]
COMMUNICATING = [layout for layout in LAYOUTS if layout.collectives is not None]
DIFFERENTIATED = [layout for layout in LAYOUTS if layout.grad_argnums]
GRAD_EQUAL = DIFFERENTIATED + [c for c in SHARD_MAP_CASES if c.grad_argnums]


def over(cases: list[Case]):
  """Parametrizes `case` over `cases`, ids the case names, module-scoped."""
  lowest = [pytest.mark.lowest_versions]
  return pytest.mark.parametrize(
    "case",
    [
      pytest.param(
        c,
        id=c.name,
        marks=lowest if getattr(c, "lowest_versions", False) else [],
      )
      for c in cases
    ],
    scope="module",
  )


@pytest.fixture(scope="module")
def jax_mode(request):
  """tests/conftest.py's `jax_mode` (the same switch), module-scoped here.

  With `case` and the mode both module-scoped, pytest runs the tests of one
  case in one mode together, where its cached run is made and used (under
  pytest-xdist, mostly on one worker).
  """
  with modes.x64_mode(getattr(request, "param", None)) as mode:
    yield mode


# ---- running a case once per x64 mode --------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
  """A case compiled for its mesh and run, and run unsharded.

  The gradients are of `sum(weights * fn(...))` with respect to the
  `grad_argnums` arguments (empty tuples without them).
  """

  mesh: Mesh
  out: jax.Array  # on the mesh
  want: jax.Array  # unsharded, on the mesh's first device
  collectives: list[str]
  grads: tuple[jax.Array, ...]  # on the mesh
  want_grads: tuple[jax.Array, ...]  # unsharded
  grad_collectives: list[str]


def _rng(case: Case, stream: int) -> np.random.Generator:
  return np.random.default_rng([zlib.crc32(case.name.encode()), stream])


def _put(args, specs, mesh) -> tuple[jax.Array, ...]:
  return tuple(
    jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs)
  )


def _grad_fn(fn, grad_argnums):
  """(args..., weights) -> grads of sum(weights * fn(args)) wrt grad_argnums."""

  def grads(*args_and_weights):
    *args, weights = args_and_weights

    def objective(*diff):
      full = list(args)
      for n, value in zip(grad_argnums, diff):
        full[n] = value
      return jnp.sum(weights * fn(*full))

    return jax.grad(objective, argnums=tuple(range(len(grad_argnums))))(
      *(args[n] for n in grad_argnums)
    )

  return grads


@functools.cache
def _reference(fn, grad_argnums):
  """(args, weights) -> (fn(*args), its gradients), one program.

  One jitted function per (fn, grad_argnums), so that cases sharing them
  share jit's compilation cache.
  """

  def reference(args, weights):
    grads = _grad_fn(fn, grad_argnums)(*args, weights) if grad_argnums else ()
    return fn(*args), grads

  return jax.jit(reference, compiler_options=COMPILER_OPTIONS)


@functools.cache
def _run(case: Case, jax_mode: str) -> Run:
  """`case` run once per x64 mode (`jax_mode` keys the cache; the run is made
  in the current mode)."""
  del jax_mode
  mesh = make_mesh(case.mesh)
  args = case.make_args(_rng(case, 0))
  sharded_args = _put(args, case.in_specs, mesh)
  fn = case.partitioned(mesh)
  compiled = jax.jit(fn).lower(*sharded_args).compile(COMPILER_OPTIONS)
  out = compiled(*sharded_args)
  weights, grads, grad_collectives = None, (), []
  if case.grad_argnums:
    weights = ints_as_floats(_rng(case, 1), out.shape)
    sharded_weights = jax.device_put(
      weights, NamedSharding(mesh, case.out_spec)
    )
    grad_compiled = (
      jax.jit(_grad_fn(fn, case.grad_argnums))
      .lower(*sharded_args, sharded_weights)
      .compile(COMPILER_OPTIONS)
    )
    grads = grad_compiled(*sharded_args, sharded_weights)
    grad_collectives = collectives(grad_compiled.as_text())
  want, want_grads = _reference(case.global_fn, case.grad_argnums)(
    *jax.device_put((args, weights), mesh.devices.flat[0])
  )
  return Run(
    mesh,
    out,
    want,
    collectives(compiled.as_text()),
    grads,
    want_grads,
    grad_collectives,
  )


def _assert_sharding(array, mesh, spec, context):
  got = getattr(array.sharding, "spec", array.sharding)
  assert array.sharding.is_equivalent_to(
    NamedSharding(mesh, spec), array.ndim
  ), f"{context}: expected {spec}, got {got}"


# ---- the checks ------------------------------------------------------------


@pytest.mark.exhaustive(default=6)
@over(LAYOUTS + SHARD_MAP_CASES)
def test_equal(case, jax_mode):
  run = _run(case, jax_mode)
  assert_same(run.out, run.want, f"{case.name}: sharded vs unsharded")


@over(FREE)
def test_sharding(case, jax_mode):
  run = _run(case, jax_mode)
  _assert_sharding(run.out, run.mesh, case.out_spec, f"{case.name} output")


@over(FREE)
def test_no_collectives(case, jax_mode):
  found = _run(case, jax_mode).collectives
  assert not found, f"collectives in HLO: {found}"


@pytest.mark.exhaustive(default=2)
@over(COMMUNICATING + SHARD_MAP_CASES)
def test_collectives(case, jax_mode):
  found = _run(case, jax_mode).collectives
  source = (
    "docs/sharding.md documents" if isinstance(case, Layout) else "expected"
  )
  assert tuple(found) == case.collectives, (
    f"XLA emits {found}, {source} {list(case.collectives)}"
  )


@over(COMMUNICATING)
def test_compile_options_keep_collectives(case, jax_mode):
  mesh = make_mesh(case.mesh)
  sharded_args = _put(case.make_args(_rng(case, 0)), case.in_specs, mesh)
  lowered = jax.jit(case.partitioned(mesh)).lower(*sharded_args)
  found = collectives(lowered.compile().as_text())
  fast = _run(case, jax_mode).collectives
  assert found == fast, (
    f"a default compile emits {found}, one with {COMPILER_OPTIONS} {fast}"
  )


@pytest.mark.exhaustive(default=2)
@over(GRAD_EQUAL)
def test_grad_equal(case, jax_mode):
  run = _run(case, jax_mode)
  for n, got, want in zip(case.grad_argnums, run.grads, run.want_grads):
    assert_same(
      got, want, f"{case.name}: gradient wrt argument {n}, sharded vs unsharded"
    )


@over(DIFFERENTIATED)
def test_grad_sharding(case, jax_mode):
  run = _run(case, jax_mode)
  for n, grad in zip(case.grad_argnums, run.grads):
    _assert_sharding(
      grad,
      run.mesh,
      case.in_specs[n],
      f"{case.name}: gradient wrt argument {n}",
    )


@over([layout for layout in DIFFERENTIATED if not layout.grad_collectives])
def test_grad_no_collectives(case, jax_mode):
  found = _run(case, jax_mode).grad_collectives
  assert not found, f"collectives in HLO: {found}"


@over([layout for layout in DIFFERENTIATED if layout.grad_collectives])
def test_grad_collectives(case, jax_mode):
  found = _run(case, jax_mode).grad_collectives
  assert tuple(found) == case.grad_collectives, (
    f"XLA emits {found}, expected {list(case.grad_collectives)}"
  )


# The constructed path (GPU, TPU): the gathers' transposes sort and fold per
# coordinate of the dims a read keeps (batch dims), in rows of the dims it
# copies whole, so every gradient keeps its sharding. Its collectives beyond
# the CPU program's gather ints only: the fold loop's bound (one per
# device), and where the indices are sharded but the table is not, the
# targets to sort (docs/sharding.md).
_INT_GATHER = re.compile(
  r"= [su](?:32|64)\[([\d,]*)\]\S* all-gather(?:-start)?\("
)


def _beyond_int_gathers(hlo_text: str, most: int) -> list[str]:
  """The collectives of `hlo_text` but the all-gathers of at most `most`
  ints."""

  def small_ints(line):
    found = _INT_GATHER.search(line)
    sizes = found.group(1).split(",") if found and found.group(1) else []
    return found is not None and math.prod(map(int, sizes)) <= most

  lines = hlo_text.splitlines()
  kept = [x for x in lines if COLLECTIVE_RE.search(x) and not small_ints(x)]
  return collectives("\n".join(kept))


@over(DIFFERENTIATED)
def test_constructed_grad_keeps_the_sharding(case, jax_mode):
  mesh = make_mesh(case.mesh)
  args = _put(case.make_args(_rng(case, 0)), case.in_specs, mesh)
  run = _run(case, jax_mode)
  weights = jax.device_put(
    ints_as_floats(_rng(case, 1), run.out.shape),
    NamedSharding(mesh, case.out_spec),
  )
  with _order.forced_constructed():
    compiled = (
      jax.jit(_grad_fn(case.partitioned(mesh), case.grad_argnums))
      .lower(*args, weights)
      .compile(COMPILER_OPTIONS)
    )
  if case.name.startswith("gather"):
    assert "sort" in compiled.as_text()  # The constructed transpose.
  index_elements = sum(
    np.size(a) for a in args if jnp.issubdtype(a.dtype, jnp.integer)
  )
  most = max(DEVICES, index_elements)
  assert _beyond_int_gathers(compiled.as_text(), most) == list(
    case.grad_collectives
  )
  grads = compiled(*args, weights)
  for n, got, want in zip(case.grad_argnums, grads, run.want_grads):
    _assert_sharding(got, mesh, case.in_specs[n], f"{case.name}: argument {n}")
    assert_same(got, want, f"{case.name}: gradient wrt argument {n}")
