"""GatherND, GatherElements and StridedSlice on several devices: Mesh,
NamedSharding and shard_map.

Each row places the inputs of one operator call on a 1-D device mesh with
`NamedSharding`, runs it under `jax.jit`, and reports whether the result
equals the unsharded one, the output's sharding, and which collectives XLA's
SPMD partitioner put into the compiled program (read from
`jax.jit(f).lower(...).compile().as_text()`). Layouts that shard a dim the
operator does not index, slice or scatter along (a batch dim, a trailing slice
dim, a dim a slice keeps whole) compile to per-device work with no
communication, including their gradients; the others show what XLA does
instead. A data-parallel training step and a `jax.shard_map` vocabulary-
parallel embedding lookup follow.

On a CPU-only machine the script asks XLA for 8 host devices (the flag must be
set before JAX is imported, which this script does). On a multi-GPU or TPU
host the same script runs unchanged on the accelerators: the flag only
affects the host platform, and every size below scales with the device count.
Use --cpu to force the 8 CPU devices there.

Run: python examples/sharded.py [--cpu]   (a few seconds)
"""

import os
import sys

if "--cpu" in sys.argv:
  os.environ["JAX_PLATFORMS"] = "cpu"
# Before `import jax`: 8 CPU devices (ignored by GPU and TPU backends), unless
# the caller already chose a count.
if "xla_force_host_platform_device_count" not in os.environ.get(
  "XLA_FLAGS", ""
):
  os.environ["XLA_FLAGS"] = " ".join(
    [
      os.environ.get("XLA_FLAGS", ""),
      "--xla_force_host_platform_device_count=8",
    ]
  ).strip()

import argparse
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxops

COLLECTIVE_RE = re.compile(
  r"\b(all-gather|all-to-all|all-reduce|reduce-scatter|collective-permute)"
  r"(?:-start)?\("
)


def collectives(jitted, *args):
  """The distinct collectives in the compiled program of jitted(*args)."""
  return sorted(
    set(COLLECTIVE_RE.findall(jitted.lower(*args).compile().as_text()))
  )


def put(mesh, args, specs):
  return [
    jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs)
  ]


def layouts(rng, n):
  """(operator, layout, fn, args, in_specs, communication-free?) rows.

  Sizes are multiples of the device count n so that every sharded dim splits
  evenly.
  """

  def floats(*shape):
    return rng.integers(-9, 10, size=shape).astype(np.float32)

  def rows(size, count):  # distinct row indices, as [count, 1] tuples
    return rng.choice(size, count, replace=False)[:, None]

  d = "devices"
  return [
    (
      "GatherND",
      "batch_dims=1, data+indices sharded on the batch dim",
      lambda x, i: jaxops.gather_nd(x, i, batch_dims=1),
      (floats(2 * n, 6, 5), rng.integers(-6, 6, (2 * n, 3, 1))),
      (P(d), P(d)),
      True,
    ),
    (
      "GatherND",
      "replicated table, indices sharded (data parallel)",
      jaxops.gather_nd,
      (floats(10, 3), rng.integers(0, 10, (2 * n, 2, 1))),
      (P(), P(d)),
      True,
    ),
    (
      "GatherND",
      "table sharded on its slice (feature) dim",
      jaxops.gather_nd,
      (floats(10, 2 * n), rng.integers(0, 10, (7, 1))),
      (P(None, d), P()),
      True,
    ),
    (
      "GatherND",
      "table sharded on the indexed (row) dim",
      jaxops.gather_nd,
      (floats(2 * n, 5), rng.integers(0, 2 * n, (7, 1))),
      (P(d), P()),
      False,
    ),
    (
      "GatherElements",
      "axis=1, sharded on dim 0",
      lambda x, i: jaxops.gather_elements(x, i, axis=1),
      (floats(2 * n, 6), rng.integers(-6, 6, (2 * n, 9))),
      (P(d), P(d)),
      True,
    ),
    (
      "GatherElements",
      "axis=0, sharded on dim 0 (the axis)",
      lambda x, i: jaxops.gather_elements(x, i, axis=0),
      (floats(2 * n, 8), rng.integers(0, 2 * n, (5, 8))),
      (P(d), P()),
      False,
    ),
    (
      "ScatterNDUpdate",
      "slice updates, data+updates sharded on a trailing dim",
      jaxops.scatter_nd_update,
      (floats(6, 5, 2 * n), rows(6, 3), floats(3, 5, 2 * n)),
      (P(None, None, d), P(), P(None, None, d)),
      True,
    ),
    (
      "ScatterNDUpdate",
      "rows sharded, indices+updates replicated",
      jaxops.scatter_nd_update,
      (floats(4 * n, 5), rows(4 * n, 4), floats(4, 5)),
      (P(d), P(), P()),
      True,
    ),
    (
      "ScatterNDUpdate",
      "rows sharded, indices+updates sharded too",
      jaxops.scatter_nd_update,
      (floats(4 * n, 5), rows(4 * n, n), floats(n, 5)),
      (P(d), P(d), P(d)),
      False,
    ),
    (
      "StridedSlice",
      "[:, 1:10:2], sharded on the rows it keeps whole",
      lambda x: jaxops.strided_slice(
        x, [0, 1], [0, 10], [1, 2], begin_mask=[1, 0], end_mask=[1, 0]
      ),
      (floats(2 * n, 12),),
      (P(d),),
      True,
    ),
    (
      "StridedSlice",
      "[1::2] of a sharded dim (stride divides the block)",
      lambda x: jaxops.strided_slice(x, [1], [0], [2], end_mask=[1]),
      (floats(4 * n, 3),),
      (P(d),),
      True,
    ),
    (
      "StridedSlice",
      "[1:1+2n] of a sharded dim (offset slice)",
      lambda x: jaxops.strided_slice(x, [1], [1 + 2 * n], [1]),
      (floats(4 * n, 3),),
      (P(d),),
      False,
    ),
    (
      "StridedSlice",
      "[::-1] of a sharded dim",
      lambda x: jaxops.strided_slice(
        x, [0], [0], [-1], begin_mask=[1], end_mask=[1]
      ),
      (floats(4 * n, 3),),
      (P(d),),
      False,
    ),
  ]


def vocab_parallel_lookup(table_block, ids):
  """Embedding rows of a row-sharded table, inside shard_map (Megatron style).

  Each device gathers the ids in its block of rows; for the others it reads
  the fill value 0 (`mode="fill"`), and a psum adds up the one real row.
  """
  rows = table_block.shape[0]
  local = ids - jax.lax.axis_index("devices") * rows
  # Never negative: the operators read negative indices from the end.
  local = jnp.where((local < 0) | (local >= rows), rows, local)
  found = jaxops.gather_nd(table_block, local, mode="fill", fill_value=0)
  return jax.lax.psum(found, "devices")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--cpu",
    action="store_true",
    help="use 8 CPU devices even on a GPU/TPU host",
  )
  parser.parse_args()
  devices = jax.devices()
  n = len(devices)
  mesh = Mesh(np.array(devices), ("devices",))
  print(f"{n} {devices[0].platform} devices, mesh {dict(mesh.shape)}\n")
  if n == 1:
    print("(one device: nothing is sharded; --cpu gives 8 CPU devices)\n")
  rng = np.random.default_rng(0)

  checks, as_expected = [], []
  for op, layout, fn, args, specs, free in layouts(rng, n):
    sharded = put(mesh, args, specs)
    jitted = jax.jit(fn)
    out = jitted(*sharded)
    equal = bool(np.array_equal(np.asarray(out), np.asarray(fn(*args))))
    found = collectives(jitted, *sharded)
    checks.append(equal)
    as_expected.append(free == (not found) or n == 1)  # 1 device: all local
    print(
      f"{op:16s} {layout:55s} equal={equal}  out {str(out.sharding.spec):28s}"
      f" collectives: {', '.join(found) or 'none'}"
    )

  # A data-parallel step: loss and gradient of a batch_dims=1 lookup + pick.
  def loss(table, rows, targets):
    picked = jaxops.gather_nd(table, rows, batch_dims=1)  # [B, 3, V]
    log_probs = jax.nn.log_softmax(picked, axis=-1)
    return -jnp.sum(jaxops.gather_elements(log_probs, targets, axis=2))

  step = jax.jit(jax.value_and_grad(loss))
  args = (
    rng.standard_normal((2 * n, 6, 4)).astype(np.float32),
    rng.integers(0, 6, (2 * n, 3, 1)),
    rng.integers(0, 4, (2 * n, 3, 1)),
  )
  sharded = put(mesh, args, (P("devices"),) * 3)
  (value, grad), (want_value, want_grad) = step(*sharded), step(*args)
  equal = bool(
    np.allclose(value, want_value, rtol=1e-5)
    and np.allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
  )
  found = collectives(step, *sharded)
  checks.append(equal)
  as_expected.append(found == ["all-reduce"] or n == 1)  # the loss sum
  print(
    f"\ntraining step, per-example tables sharded on the batch: equal={equal}"
    f"  grad {grad.sharding.spec}  collectives: {', '.join(found)} "
    "(the loss sum)"
  )

  # shard_map: the vocabulary-parallel lookup, checked against gather_nd.
  table = rng.standard_normal((4 * n, 5)).astype(np.float32)
  ids = rng.integers(0, 4 * n, (12, 1))
  lookup = jax.jit(
    jax.shard_map(
      vocab_parallel_lookup,
      mesh=mesh,
      in_specs=(P("devices"), P()),
      out_specs=P(),
    )
  )
  sharded = put(mesh, (table, ids), (P("devices"), P()))
  equal = bool(np.array_equal(lookup(*sharded), jaxops.gather_nd(table, ids)))
  found = collectives(lookup, *sharded)
  checks.append(equal)
  as_expected.append(found == ["all-reduce"] or n == 1)
  print(
    f"shard_map vocabulary-parallel lookup: equal={equal}  collectives: "
    f"{', '.join(found)}"
  )

  print(
    f"\nRESULT {sum(checks)}/{len(checks)} sharded results equal the "
    f"unsharded ones; {sum(as_expected)}/{len(as_expected)} layouts "
    "communicate exactly where expected"
  )
  if not all(checks):
    raise SystemExit(1)


if __name__ == "__main__":
  main()
