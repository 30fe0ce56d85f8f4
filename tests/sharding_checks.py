"""Multi-device checks of the four operators on 8 devices, run in a subprocess.

XLA's CPU client exposes 8 devices only if `XLA_FLAGS` says so before JAX is
imported, and the pytest process has imported JAX long before, so
`tests/test_sharding.py` runs this file as a script and reads its JSON report
(one entry per check, so that each check is its own pytest item). Importing
the module (pytest does so for doctests, test_sharding.py for the check names)
touches no device.

Each `Layout` jits an operator with its inputs placed by `NamedSharding`s on a
`Mesh` and compares against the same operator run unsharded. Checks:

* `equal`: the sharded result equals the unsharded one exactly;
* `sharding`: the output carries the expected sharding (the input's, on the
  dims the operator passes through);
* `no_collectives` (communication-free layouts): the compiled HLO contains no
  all-gather, all-to-all, all-reduce, reduce-scatter or collective-permute;
* `collectives` (layouts that do need communication): the compiled HLO
  contains exactly the collectives docs/sharding.md documents for that layout;
* `grad_*`: the same for the gradient of `sum(weights * op(...))` with
  respect to the float arguments (weights sharded like the output): the
  gradient of each argument keeps that argument's sharding. The gradient with
  respect to a *replicated* argument is a sum over devices, so there
  `grad_collectives` expects exactly one all-reduce. (Write the objective as
  `sum(w * y)`, not `vdot(w, y)`: vdot flattens both arrays, and flattening an
  array sharded on an inner dim costs an all-gather.)

`shard_map/*` checks run the operators inside `jax.shard_map` on per-device
blocks (including the vocabulary-parallel lookup and update of a row-sharded
table, with local indices and the out-of-range `mode`s) and compare with the
global operator.

Usage: python tests/sharding_checks.py [--json PATH] [--verbose]
"""

from __future__ import annotations

import os

if __name__ == "__main__":
  # Must precede the first `import jax` of this process.
  os.environ["XLA_FLAGS"] = " ".join(
      [os.environ.get("XLA_FLAGS", ""),
       "--xla_force_host_platform_device_count=8"]).strip()

import argparse
import dataclasses
import json
import re
import sys
import time
import traceback
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxops

DEVICES = 8
COLLECTIVE_RE = re.compile(
    r"\b(all-gather|all-to-all|all-reduce|reduce-scatter|collective-permute)"
    r"(?:-start)?\(")

# Meshes by name: "x" is a 1-D mesh of 8 devices; "batch,model" is 4 x 2.
MESH_AXES = {"x": (("x",), (8,)), "batch,model": (("batch", "model"), (4, 2))}


def make_mesh(name: str) -> Mesh:
  axes, shape = MESH_AXES[name]
  return Mesh(np.array(jax.devices()[:DEVICES]).reshape(shape), axes)


def collectives(hlo_text: str) -> list[str]:
  """The distinct collective op kinds in compiled HLO text, sorted."""
  return sorted(set(COLLECTIVE_RE.findall(hlo_text)))


def ints_as_floats(rng, shape):
  """Small integers stored as float32: sums of them are exact in any order."""
  return rng.integers(-9, 10, size=shape).astype(np.float32)


def valid_indices(rng, sizes, lead_shape):
  """Index tuples in [-s, s-1] (negatives included), shape lead + (k,)."""
  sizes = np.asarray(sizes)
  return rng.integers(-sizes, sizes, size=(*lead_shape, len(sizes)))


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

  def check_names(self) -> list[str]:
    if self.collectives is None:
      kinds = ["equal", "sharding", "no_collectives"]
      if self.diff_argnums:
        kinds += ["grad_equal", "grad_sharding",
                  "grad_collectives" if self.grad_collectives
                  else "grad_no_collectives"]
    else:
      kinds = ["equal", "collectives"]
    return [f"{self.name}/{kind}" for kind in kinds]


def _gather_nd(batch_dims):
  return lambda d, i: jaxops.gather_nd(d, i, batch_dims=batch_dims)


def _gather_elements(axis):
  return lambda d, i: jaxops.gather_elements(d, i, axis=axis)


def _scatter(d, i, u):
  return jaxops.scatter_nd_update(d, i, u)


LAYOUTS = [
    # ---- communication-free ------------------------------------------------
    Layout("gather_nd/batch_dims1_sharded_batch", _gather_nd(1),
           lambda r: (ints_as_floats(r, (16, 6, 5)),
                      valid_indices(r, (6,), (16, 3))),
           (P("x"), P("x")), P("x")),
    Layout("gather_nd/batch_dims2_2d_mesh", _gather_nd(2),
           lambda r: (ints_as_floats(r, (8, 4, 6, 3)),
                      valid_indices(r, (6,), (8, 4, 5))),
           (P("batch", "model"), P("batch", "model")), P("batch", "model"),
           mesh="batch,model"),
    Layout("gather_nd/batch_dims1_sharded_batch_and_trailing", _gather_nd(1),
           lambda r: (ints_as_floats(r, (8, 6, 4)),
                      valid_indices(r, (6,), (8, 3))),
           (P("batch", None, "model"), P("batch")), P("batch", None, "model"),
           mesh="batch,model"),
    Layout("gather_nd/table_sharded_on_slice_dim", _gather_nd(0),
           lambda r: (ints_as_floats(r, (10, 16)),
                      valid_indices(r, (10,), (7,))),
           (P(None, "x"), P()), P(None, "x")),
    Layout("gather_nd/replicated_table_sharded_indices", _gather_nd(0),
           lambda r: (ints_as_floats(r, (10, 3)),
                      valid_indices(r, (10,), (16, 2))),
           (P(), P("x")), P("x"), grad_collectives=("all-reduce",)),
    Layout("gather_elements/axis1_sharded_dim0", _gather_elements(1),
           lambda r: (ints_as_floats(r, (16, 6)), r.integers(-6, 6, (16, 9))),
           (P("x"), P("x")), P("x")),
    Layout("gather_elements/axis0_2d_mesh_dims1_2", _gather_elements(0),
           lambda r: (ints_as_floats(r, (5, 4, 6)),
                      r.integers(-5, 5, (7, 4, 6))),
           (P(None, "batch", "model"), P(None, "batch", "model")),
           P(None, "batch", "model"), mesh="batch,model"),
    Layout("scatter_nd_update/slices_sharded_trailing", _scatter,
           lambda r: (ints_as_floats(r, (6, 5, 16)), unique_rows(r, 6, 3),
                      ints_as_floats(r, (3, 5, 16))),
           (P(None, None, "x"), P(), P(None, None, "x")), P(None, None, "x"),
           diff_argnums=(0, 2)),
    Layout("scatter_nd_update/elements_k2_sharded_trailing", _scatter,
           lambda r: (ints_as_floats(r, (4, 5, 8)),
                      np.array([[0, 1], [3, -1], [-2, 2], [0, 1]]),
                      ints_as_floats(r, (4, 8))),
           (P(None, None, "x"), P(), P(None, "x")), P(None, None, "x"),
           diff_argnums=(0, 2)),
    Layout("scatter_nd_update/rows_sharded_replicated_updates", _scatter,
           lambda r: (ints_as_floats(r, (16, 5)), unique_rows(r, 16, 6),
                      ints_as_floats(r, (6, 5))),
           (P("x"), P(), P()), P("x"), diff_argnums=(0, 2),
           grad_collectives=("all-reduce",)),
    Layout("strided_slice/cols_step2_sharded_rows",
           lambda d: jaxops.strided_slice(d, [0, 1], [0, 10], [1, 2],
                                          begin_mask=[1, 0], end_mask=[1, 0]),
           lambda r: (ints_as_floats(r, (16, 12)),), (P("x"),), P("x")),
    Layout("strided_slice/stride_divides_shard_of_sharded_dim",
           # [1::2] of 32 rows in blocks of 4: each block keeps its own rows.
           lambda d: jaxops.strided_slice(d, [1], [0], [2], end_mask=[1]),
           lambda r: (ints_as_floats(r, (32, 4)),), (P("x"),), P("x")),
    Layout("strided_slice/shrink_reverse_2d_mesh",
           # [2, ..., ::-1] on [4, 8, 6, 3]: dims 1 and 2 pass through.
           lambda d: jaxops.strided_slice(d, [2, 0, 0], [0, 0, 0], [1, 1, -1],
                                          begin_mask=[0, 0, 1],
                                          end_mask=[0, 0, 1],
                                          shrink_axis_mask=[1, 0, 0],
                                          ellipsis_mask=[0, 1, 0]),
           lambda r: (ints_as_floats(r, (4, 8, 6, 3)),),
           (P(None, "batch", "model"),), P("batch", "model"),
           mesh="batch,model"),
    Layout("strided_slice/new_axis_sharded_kept_dim",
           lambda d: jaxops.strided_slice(d, [0, 0, 1], [0, 0, 5], [1, 1, 1],
                                          begin_mask=[1, 0, 0],
                                          end_mask=[1, 0, 0],
                                          new_axis_mask=[0, 1, 0]),
           lambda r: (ints_as_floats(r, (16, 6)),), (P("x"),), P("x")),
    # ---- layouts that need communication -----------------------------------
    Layout("gather_nd/table_sharded_on_indexed_dim", _gather_nd(0),
           lambda r: (ints_as_floats(r, (16, 5)),
                      valid_indices(r, (16,), (7,))),
           (P("x"), P()), None, collectives=("all-reduce",)),
    Layout("gather_elements/sharded_on_axis", _gather_elements(0),
           lambda r: (ints_as_floats(r, (16, 8)), r.integers(-16, 16, (5, 8))),
           (P("x"), P()), None, collectives=("all-reduce",)),
    Layout("scatter_nd_update/indices_and_updates_sharded", _scatter,
           lambda r: (ints_as_floats(r, (32, 5)), unique_rows(r, 32, 8),
                      ints_as_floats(r, (8, 5))),
           (P("x"), P("x"), P("x")), None,
           collectives=("all-gather", "all-reduce")),
    Layout("scatter_nd_update/indices_and_updates_sharded_unique",
           lambda d, i, u: jaxops.scatter_nd_update(d, i, u,
                                                    unique_indices=True),
           lambda r: (ints_as_floats(r, (32, 5)), unique_rows(r, 32, 8),
                      ints_as_floats(r, (8, 5))),
           (P("x"), P("x"), P("x")), None, collectives=("all-gather",)),
    Layout("strided_slice/offset_slice_of_sharded_dim",
           lambda d: jaxops.strided_slice(d, [2], [18], [1]),
           lambda r: (ints_as_floats(r, (32, 4)),), (P("x"),), None,
           collectives=("collective-permute",)),
    Layout("strided_slice/reverse_of_sharded_dim",
           lambda d: jaxops.strided_slice(d, [0], [0], [-1], begin_mask=[1],
                                          end_mask=[1]),
           lambda r: (ints_as_floats(r, (32, 4)),), (P("x"),), None,
           collectives=("collective-permute",)),
    Layout("strided_slice/uneven_slice_of_sharded_dim",
           # 28 rows do not split into 8 blocks: the result is replicated.
           lambda d: jaxops.strided_slice(d, [4], [32], [1]),
           lambda r: (ints_as_floats(r, (32, 4)),), (P("x"),), None,
           collectives=("all-gather", "collective-permute")),
]


def _block_local(ids, rows):
  """Global row ids -> indices into this device's block of `rows` rows.

  Ids outside the block become `rows` (out of range), never negative: the
  operators read a negative index from the end of the block.
  """
  local = ids - jax.lax.axis_index("x") * rows
  return jnp.where((local < 0) | (local >= rows), rows, local)


def _vocab_parallel_lookup(table_block, ids):
  """Rows of a row-sharded table at global `ids`, inside shard_map.

  Each device gathers the ids that fall in its block (local index = id -
  offset); the others read the fill value 0 (`mode="fill"`), and a psum adds
  the one real row per id -- Megatron's vocabulary-parallel embedding.
  """
  local = jaxops.gather_nd(table_block, _block_local(ids, table_block.shape[0]),
                           mode="fill", fill_value=0)
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
  """`block_fn` under shard_map must equal `global_fn` on the whole arrays."""
  name: str
  block_fn: Callable[..., jax.Array]
  global_fn: Callable[..., jax.Array]
  make_args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
  in_specs: tuple[P, ...]
  out_spec: P
  collectives: tuple[str, ...] = ()
  grad: bool = False

  def check_names(self) -> list[str]:
    kinds = ["equal", "collectives"] + (["grad_equal"] if self.grad else [])
    return [f"shard_map/{self.name}/{kind}" for kind in kinds]


SHARD_MAP_CASES = [
    ShardMapCase("gather_nd_batch_dims1", _gather_nd(1), _gather_nd(1),
                 lambda r: (ints_as_floats(r, (16, 6, 5)),
                            valid_indices(r, (6,), (16, 3))),
                 (P("x"), P("x")), P("x"), grad=True),
    ShardMapCase("gather_elements_axis1", _gather_elements(1),
                 _gather_elements(1),
                 lambda r: (ints_as_floats(r, (16, 6)),
                            r.integers(-6, 6, (16, 9))),
                 (P("x"), P("x")), P("x"), grad=True),
    ShardMapCase("scatter_nd_update_trailing", _scatter, _scatter,
                 lambda r: (ints_as_floats(r, (6, 5, 16)),
                            unique_rows(r, 6, 3),
                            ints_as_floats(r, (3, 5, 16))),
                 (P(None, None, "x"), P(), P(None, None, "x")),
                 P(None, None, "x"), grad=True),
    ShardMapCase("strided_slice_rows",
                 lambda d: jaxops.strided_slice(d, [0, -1], [0, 0], [1, -3],
                                                begin_mask=[1, 0],
                                                end_mask=[1, 1]),
                 lambda d: jaxops.strided_slice(d, [0, -1], [0, 0], [1, -3],
                                                begin_mask=[1, 0],
                                                end_mask=[1, 1]),
                 lambda r: (ints_as_floats(r, (16, 10)),), (P("x"),), P("x"),
                 grad=True),
    ShardMapCase("vocab_parallel_lookup", _vocab_parallel_lookup,
                 _gather_nd(0),
                 lambda r: (ints_as_floats(r, (32, 5)),
                            r.integers(0, 32, (12, 1))),
                 (P("x"), P()), P(), collectives=("all-reduce",), grad=True),
    ShardMapCase("vocab_parallel_update", _vocab_parallel_update, _scatter,
                 lambda r: (ints_as_floats(r, (32, 5)), unique_rows(r, 32, 9),
                            ints_as_floats(r, (9, 5))),
                 (P("x"), P(), P()), P("x"), grad=True),
]


def all_check_names() -> list[str]:
  """Every check this script reports, in order (no device is touched)."""
  names = [n for layout in LAYOUTS for n in layout.check_names()]
  return names + [n for case in SHARD_MAP_CASES for n in case.check_names()]


def _put(args, specs, mesh):
  return [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs)]


def _same_sharding(array, mesh, spec) -> tuple[bool, str]:
  expected = NamedSharding(mesh, spec)
  ok = array.sharding.is_equivalent_to(expected, array.ndim)
  got = getattr(array.sharding, "spec", array.sharding)
  return ok, f"expected {spec}, got {got}"


def _equal(got, want) -> tuple[bool, str]:
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape:
    return False, f"shape {got.shape} != unsharded {want.shape}"
  diff = float(np.max(np.abs(got - want))) if got.size else 0.0
  return bool(np.array_equal(got, want)), f"max |difference| {diff:g}"


def _grad_fn(fn, diff_argnums):
  """(args..., weights) -> grads of vdot(weights, fn(args)) w.r.t. diff args."""
  def grads(*args_and_weights):
    *args, weights = args_and_weights
    def objective(*diff):
      full = list(args)
      for n, value in zip(diff_argnums, diff):
        full[n] = value
      return jnp.sum(weights * fn(*full))
    return jax.grad(objective, argnums=tuple(range(len(diff_argnums))))(
        *(args[n] for n in diff_argnums))
  return grads


def check_layout(layout: Layout, rng) -> dict[str, tuple[bool, str]]:
  mesh = make_mesh(layout.mesh)
  args = layout.make_args(rng)
  sharded = _put(args, layout.in_specs, mesh)
  jitted = jax.jit(layout.fn)
  out = jitted(*sharded)
  want = layout.fn(*args)                  # unsharded, on the default device
  results = {"equal": _equal(out, want)}
  found = collectives(jitted.lower(*sharded).compile().as_text())
  if layout.collectives is not None:
    results["collectives"] = (
        tuple(found) == layout.collectives,
        f"XLA emits {found}, README documents {list(layout.collectives)}")
    return {f"{layout.name}/{k}": v for k, v in results.items()}
  results["sharding"] = _same_sharding(out, mesh, layout.out_spec)
  results["no_collectives"] = (not found, f"collectives in HLO: {found}")
  if layout.diff_argnums:
    weights = ints_as_floats(rng, np.shape(want))
    grad_fn = _grad_fn(layout.fn, layout.diff_argnums)
    grad_jit = jax.jit(grad_fn)
    sharded_weights = jax.device_put(weights,
                                     NamedSharding(mesh, layout.out_spec))
    grads = grad_jit(*sharded, sharded_weights)
    want_grads = grad_fn(*args, weights)
    checks = [_equal(g, w) for g, w in zip(grads, want_grads)]
    results["grad_equal"] = (all(ok for ok, _ in checks),
                             "; ".join(msg for _, msg in checks))
    checks = [_same_sharding(g, mesh, layout.in_specs[n])
              for g, n in zip(grads, layout.diff_argnums)]
    results["grad_sharding"] = (all(ok for ok, _ in checks),
                                "; ".join(msg for _, msg in checks))
    found = collectives(
        grad_jit.lower(*sharded, sharded_weights).compile().as_text())
    if layout.grad_collectives:
      results["grad_collectives"] = (
          tuple(found) == layout.grad_collectives,
          f"XLA emits {found}, expected {list(layout.grad_collectives)}")
    else:
      results["grad_no_collectives"] = (not found,
                                        f"collectives in HLO: {found}")
  return {f"{layout.name}/{k}": v for k, v in results.items()}


def check_shard_map(case: ShardMapCase, rng) -> dict[str, tuple[bool, str]]:
  mesh = make_mesh("x")
  args = case.make_args(rng)
  mapped = jax.jit(jax.shard_map(case.block_fn, mesh=mesh,
                                 in_specs=case.in_specs,
                                 out_specs=case.out_spec))
  sharded = _put(args, case.in_specs, mesh)
  want = case.global_fn(*args)
  results = {"equal": _equal(mapped(*sharded), want)}
  found = collectives(mapped.lower(*sharded).compile().as_text())
  results["collectives"] = (tuple(found) == case.collectives,
                            f"HLO has {found}, expected "
                            f"{list(case.collectives)}")
  if case.grad:
    weights = ints_as_floats(rng, np.shape(want))
    grad_mapped = jax.jit(jax.grad(
        lambda d, *rest: jnp.sum(weights * mapped(d, *rest))))
    grad_global = jax.grad(
        lambda d, *rest: jnp.sum(weights * case.global_fn(d, *rest)))
    results["grad_equal"] = _equal(grad_mapped(*sharded), grad_global(*args))
  return {f"shard_map/{case.name}/{k}": v for k, v in results.items()}


def run_all(verbose: bool = False) -> dict[str, dict[str, object]]:
  """Runs every check; a check that raises is reported failed with the error."""
  if jax.device_count() < DEVICES:
    raise SystemExit(f"need {DEVICES} devices, have {jax.devices()}: set "
                     "XLA_FLAGS=--xla_force_host_platform_device_count=8 "
                     "before JAX is imported")
  report: dict[str, dict[str, object]] = {}
  groups = [(layout, check_layout) for layout in LAYOUTS]
  groups += [(case, check_shard_map) for case in SHARD_MAP_CASES]
  for index, (item, check) in enumerate(groups):
    start = time.perf_counter()
    try:
      results = check(item, np.random.default_rng(index))
    except Exception:  # one broken layout must not hide the other checks
      error = traceback.format_exc(limit=3)
      results = {name: (False, error) for name in item.check_names()}
    seconds = time.perf_counter() - start
    for name, (ok, detail) in results.items():
      report[name] = {"ok": bool(ok), "detail": detail}
      if verbose:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if verbose:
      print(f"     ({seconds:.2f} s)")
  return report


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--json", help="write the report to this file")
  parser.add_argument("--verbose", action="store_true")
  args = parser.parse_args()
  start = time.perf_counter()
  report = run_all(verbose=args.verbose)
  failed = [name for name, r in report.items() if not r["ok"]]
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=1)
  print(f"{len(report) - len(failed)}/{len(report)} checks passed in "
        f"{time.perf_counter() - start:.1f} s on {jax.device_count()} "
        f"{jax.devices()[0].platform} devices")
  for name in failed:
    print(f"FAILED {name}: {report[name]['detail']}")
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  main()
