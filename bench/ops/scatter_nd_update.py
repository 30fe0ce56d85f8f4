"""ScatterNDUpdate-3: jaxops.scatter_nd_update vs `data.at[columns].set`.

Forms: `jaxops` (default: duplicate tuples resolved, the last one wins),
`jaxops_unique` (`unique_indices=True`), `plain` (`.at[...].set`), each also
with data donated; for PyTorch, `index_put_` on a clone (out of place) and
on a fresh copy made before the clock (`torch.inplace`, the counterpart of a
donated call). Most cases draw their index tuples without replacement, so
every formulation must agree bit for bit. The duplicate cases repeat tuples
(10% of them, or all of them into a few targets): there only the default
jaxops form is defined, `plain`, `jaxops_unique` and PyTorch (whose
`index_put_` leaves the winner of a duplicate undefined) are left out, and
OpenVINO and onnxruntime run on one thread, the only setting where they apply
duplicates in order, last wins (with two threads their results vary from run
to run). The vmap cases compare `jax.vmap(jaxops.scatter_nd_update)` with the
equivalent single scatter into the batched data, the batch position
prepended to every index tuple.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import (
  TIES_SPLIT,
  Case,
  Traffic,
  broadcast_batch,
  small_ints,
  sweep_case,
  tied_extrema,
  vmap_cases,
)

_UNDEFINED = "index_put_ leaves the winner of duplicate indices undefined"
_DUPLICATES = {
  "jaxops_unique": "the unique_indices promise does not hold here",
  "plain": ".at[].set leaves the winner of duplicate indices unspecified",
  "torch": _UNDEFINED,
  "torch.inplace": _UNDEFINED,
}


def plain(data, indices, updates):
  columns = tuple(indices[..., j] for j in range(indices.shape[-1]))
  return data.at[columns].set(updates)


def _columns(indices):
  return tuple(indices[..., j] for j in range(indices.shape[-1]))


def torch_form(data, indices, updates):
  """Out of place: a clone, then `index_put_`."""
  return data.clone().index_put_(_columns(indices), updates)


def torch_inplace(data, indices, updates):
  data.index_put_(_columns(indices), updates)


def _targets(rng, space, tuples, duplicates, order=None):
  """Flat target positions: distinct, or with repeats.

  `duplicates` None: all distinct, in random order, or with `order`
  "sorted" ascending (what `jnp.unique` returns) or "consecutive" (a run of
  adjacent slots from a random start, as KV-cache writes). A float p:
  distinct, then a fraction p of the positions copy the target of another
  position. An int n: every tuple hits one of n distinct targets.
  """
  if order == "consecutive":
    return rng.integers(0, space - tuples + 1) + np.arange(tuples)
  if duplicates is None:
    flat = rng.choice(space, size=tuples, replace=False)
    return np.sort(flat) if order == "sorted" else flat
  if isinstance(duplicates, float):
    flat = rng.choice(space, size=tuples, replace=False)
    copies = rng.choice(tuples, size=int(duplicates * tuples), replace=False)
    flat[copies] = flat[rng.choice(tuples, size=copies.size)]
    return flat
  few = rng.choice(space, size=duplicates, replace=False)
  return few[rng.integers(0, duplicates, size=tuples)]


def case(
  name,
  tier,
  data_shape,
  indices_shape,
  *,
  grad=True,
  duplicates=None,
  order=None,
):
  k = indices_shape[-1]
  lead = indices_shape[:-1]
  updates_shape = tuple(lead) + tuple(data_shape[k:])
  tuples = math.prod(lead)
  slice_elems = math.prod(data_shape[k:])

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    flat = _targets(rng, math.prod(data_shape[:k]), tuples, duplicates, order)
    indices = np.stack(np.unravel_index(flat, data_shape[:k]), axis=-1)
    indices = indices.reshape(indices_shape).astype(np.int32)
    updates = small_ints(rng, updates_shape, 3)
    return data, indices, updates

  # Donated: read indices and updates, write the updated slices in place.
  traffic = Traffic.indexed(
    math.prod(indices_shape),
    tuples,
    slice_elems,
    math.prod(data_shape),
    copy_data=True,
  )
  forms = {
    "jaxops": lambda d, i, u: jaxops.scatter_nd_update(d, i, u),
    "jaxops_unique": lambda d, i, u: jaxops.scatter_nd_update(
      d, i, u, unique_indices=True
    ),
    "plain": plain,
  }
  unique = duplicates is None
  if not unique:
    forms = {"jaxops": forms["jaxops"]}
  return Case(
    op="scatter_nd_update",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
    f"updates {list(updates_shape)}"
    + (f", {order} targets" if order else "")
    + (
      ""
      if unique
      else f", {duplicates:.0%} of the tuples repeat another"
      if isinstance(duplicates, float)
      else f", every tuple hits one of {duplicates} targets"
    ),
    make_inputs=make_inputs,
    forms=forms,
    diff_argnums=(0, 2),
    traffic=traffic,
    donate_argnum=0,
    openvino=lambda d, i, u: runtimes.openvino_opset().scatter_nd_update(
      d, i, u
    ),
    onnx=lambda inputs: runtimes.onnx_model(
      [runtimes.onnx_node("ScatterND", ["x0", "x1", "x2"])], inputs
    ),
    torch=torch_form if unique else None,
    torch_inplace=torch_inplace if unique else None,
    peer_threads=None if unique else 1,
    unique=unique,
    excluded={} if unique else _DUPLICATES,
    grad=grad,
  )


# ScatterNDUpdate-15 reductions ---------------------------------------------

_PLAIN_REDUCE = {
  "sum": lambda d, i, u: d.at[_columns(i)].add(u),
  "max": lambda d, i, u: d.at[_columns(i)].max(u),
}
_ONNX_REDUCE = {"sum": "add", "max": "max"}


def _torch_reduce(reduction):
  def fn(data, indices, updates):
    if reduction == "sum" and indices.shape[-1] == 1:
      return data.index_add(0, indices[..., 0].reshape(-1), updates)
    flat = updates.reshape((-1,) + tuple(data.shape[indices.shape[-1] :]))
    rows = indices.reshape(-1, indices.shape[-1])
    assert rows.shape[-1] == 1, "PyTorch form for row scatters only"
    index = rows.reshape((-1,) + (1,) * (flat.dim() - 1)).expand(flat.shape)
    return data.scatter_reduce(0, index, flat, "amax", include_self=True)

  return fn


def _row_ties(inputs, out):
  """`tied_extrema` of a row scatter (k = 1)."""
  data, indices, updates = inputs
  row = math.prod(data.shape[1:])
  rows = indices.reshape(-1, 1).astype(np.int64)
  targets = rows * row + np.arange(row)
  return tied_extrema(data, targets, updates, out)


def reduction_case(
  name, tier, data_shape, indices_shape, reduction, *, ascending=False
):
  """`reduction` of uniformly drawn (repeating) tuples: the graph layer,
  few targets, the IR example; `ascending` sorts them (a graph's edges in
  CSR order, by destination). Small-integer values: every order of
  summation gives the same float, so plain `.at[].add` must agree bit for
  bit with jaxops' serial order."""
  k = indices_shape[-1]
  updates_shape = tuple(indices_shape[:-1]) + tuple(data_shape[k:])
  tuples = math.prod(indices_shape[:-1])

  def make_inputs(rng):
    flat = rng.integers(0, math.prod(data_shape[:k]), tuples)
    if ascending:
      flat.sort()
    indices = np.stack(np.unravel_index(flat, data_shape[:k]), axis=-1)
    return (
      small_ints(rng, data_shape, 3),
      indices.reshape(indices_shape).astype(np.int32),
      small_ints(rng, updates_shape, 3),
    )

  slice_elems = math.prod(data_shape[k:])
  onnx_reduction = _ONNX_REDUCE[reduction]
  return Case(
    op="scatter_nd_update",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
    f"updates {list(updates_shape)}, reduction {reduction}"
    + (", ascending tuples" if ascending else ""),
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d, i, u: jaxops.scatter_nd_update(
        d, i, u, reduction=reduction
      ),
      # Not `plain`: the .at[].set bars of this module do not apply.
      "plain_reduce": _PLAIN_REDUCE[reduction],
    },
    diff_argnums=(0, 2),
    traffic=Traffic.indexed(
      math.prod(indices_shape),
      tuples,
      slice_elems,
      math.prod(data_shape),
      copy_data=True,
    ),
    openvino=lambda d, i, u: _opset15().scatter_nd_update(d, i, u, reduction),
    onnx=lambda inputs: runtimes.onnx_model(
      [
        runtimes.onnx_node(
          "ScatterND", ["x0", "x1", "x2"], reduction=onnx_reduction
        )
      ],
      inputs,
    ),
    torch=_torch_reduce(reduction) if k == 1 else None,
    # onnxruntime's ScatterND reductions race on more threads (wrong sums):
    # timed on the run's threads too, marked when wrong.
    peer_threads=1,
    threaded_peer=True,
    unique=False,
    excluded={"torch": "PyTorch forms for row scatters (k = 1) only"}
    if k != 1
    else {},
    # Plain autodiff of .at[].max splits the gradient among tied elements;
    # jaxops gives it to the one that produced the result: not comparable.
    grad_forms=("jaxops",) if reduction == "max" else None,
    # PyTorch's amax splits it too: compared where nothing ties.
    peer_grad_convention=(TIES_SPLIT, _row_ties)
    if reduction == "max"
    else None,
  )


def _opset15():
  import openvino.opset15 as ops

  return ops


def reduction_cases(smoke: bool) -> list[Case]:
  if smoke:
    nodes, edges, features, few = 100, 1000, 8, 2000
    ir = ((20, 16, 10, 15), (5, 25, 3))
  else:
    nodes, edges, features, few = 100_000, 1_000_000, 64, 1_000_000
    ir = ((1000, 256, 10, 15), (25, 125, 3))
  graph = ((nodes, features), (edges, 1))
  return [
    reduction_case("ir_sum", "ir", *ir, "sum"),
    reduction_case("graph_sum", "large", *graph, "sum"),
    reduction_case("graph_sum_sorted", "large", *graph, "sum", ascending=True),
    reduction_case("graph_max", "large", *graph, "max"),
    reduction_case("few64_sum", "large", (64,), (few, 1), "sum"),
  ]


def _with_batch(indices):
  """Prepends each example's batch position to its index tuples."""
  batch = indices.shape[0]
  position = jnp.broadcast_to(
    jnp.arange(batch, dtype=indices.dtype).reshape(
      (batch,) + (1,) * (indices.ndim - 1)
    ),
    indices.shape[:-1] + (1,),
  )
  return jnp.concatenate([position, indices], axis=-1)


def batched_cases(batch, data_shape, indices_shape) -> list[Case]:
  """vmap over all three arguments, data only, indices and updates only."""
  base = case("vmap", "vmap", data_shape, indices_shape)
  b = batch
  return vmap_cases(
    base,
    b,
    {
      "vmap_both": (
        (0, 0, 0),
        lambda d, i, u: jaxops.scatter_nd_update(d, _with_batch(i), u),
      ),
      "vmap_data": (
        (0, None, None),
        lambda d, i, u: jaxops.scatter_nd_update(
          d, _with_batch(broadcast_batch(i, b)), broadcast_batch(u, b)
        ),
      ),
      "vmap_indices": (
        (None, 0, 0),
        lambda d, i, u: jaxops.scatter_nd_update(
          broadcast_batch(d, b), _with_batch(i), u
        ),
      ),
    },
    forms=("jaxops", "jaxops_unique"),
    donate=True,
  )


def cases(smoke: bool) -> list[Case]:
  if smoke:
    ir = ((20, 16, 10, 15), (5, 25, 3))
    large = ((64, 64), (512, 2))
    side, updates, rows, fixed = (
      64,
      [16, 48, 160, 512, 1600],
      [4, 12, 40, 128, 400],
      32,
    )
    vmap = batched_cases(4, (16, 16), (32, 2))
    cache = ((64, 4, 8), (8, 1))
  else:
    ir = ((1000, 256, 10, 15), (25, 125, 3))
    large = ((4096, 4096), (262144, 2))
    side, updates, rows, fixed = (
      4096,
      [2621, 8290, 26214, 82897, 262144],
      [41, 130, 410, 1295, 4096],
      16384,
    )
    vmap = batched_cases(32, (256, 256), (4096, 2))
    # 64 new positions of a [4096, 8, 128] KV cache (tokens, heads, dim).
    cache = ((4096, 8, 128), (64, 1))
  out = [
    case("ir", "ir", *ir),
    case("large", "large", *large),
    case("ir_dup10", "ir", *ir, duplicates=0.1),
    case("large_dup10", "large", *large, duplicates=0.1),
    case("large_few64", "large", *large, duplicates=64),
    # Sorted unique indices (jnp.unique's ids, sorted embedding rows, cache
    # positions), which the default proves unique in one pass.
    case("large_sorted", "large", *large, order="sorted", grad=False),
    case("kv_cache", "large", *cache, order="consecutive", grad=False),
  ]
  out += vmap
  out += reduction_cases(smoke)
  # Donated time must follow the number of updates (first sweep) and not the
  # data size (second sweep, fixed number of updates).
  out += [
    sweep_case(
      case(f"sweep_updates{n}", "sweep", (side, side), (n, 2)), "updates", n
    )
    for n in updates
  ]
  out += [
    sweep_case(
      case(f"sweep_rows{r}", "sweep", (r, side), (fixed, 2)),
      "data_elements",
      r * side,
    )
    for r in rows
  ]
  return out


_BOTH = ("jaxops", "jaxops.donated")

BARS = (
  *bars.peer_bars(_BOTH),
  bars.Ratio(
    "donated within 1.5x of PyTorch's in-place index_put_",
    (("jaxops.donated", "torch.inplace"),),
    at_most=1.5,
  ),
  bars.Ratio(
    "fwd+bwd at least 1.4x faster than autodiff of plain .at[].set",
    (("jaxops.grad", "plain.grad"),),
    at_least=1.4,
    tiers=("ir", "large"),
  ),
  # On CPU the default is XLA's serial write (docs/design.md#serial-cpu):
  # no winner search, so within 1.1x of the unique write on every case
  # where unique_indices=True is right (its indices unique).
  bars.Ratio(
    "default, donated, within 1.1x of unique_indices=True where the indices "
    "are unique",
    (("jaxops.donated", "jaxops_unique.donated"),),
    at_most=1.1,
    unique_only=True,
  ),
  bars.Ratio(
    "repeated tuples: at or ahead of onnxruntime on one thread",
    (("jaxops", "onnxruntime"), ("jaxops.donated", "onnxruntime")),
    at_most=1.0,
    cases=("large_dup10", "large_few64"),
  ),
  bars.vmap_bar(
    "the equivalent batched scatter",
    (
      ("jaxops", "batched"),
      ("jaxops.donated", "batched.donated"),
      ("jaxops.grad", "batched.grad"),
    ),
  ),
  bars.DonatedGrowth(
    "donated time grows with the number of updates, not the data size",
    ("jaxops.donated", "jaxops_unique.donated", "plain.donated"),
  ),
  bars.reduction_peer_bar(("graph_*", "few64_*")),
  bars.Ratio(
    "reduction within 1.15x of plain .at[].add/.max",
    (("jaxops", "plain_reduce"),),
    at_most=1.15,
    cases=("graph_*", "few64_*", "ir_*"),
  ),
  bars.Ratio(
    "reduction fwd+bwd at or ahead of plain autodiff",
    (("jaxops.grad", "plain_reduce.grad"),),
    at_most=1.0,
    cases=("graph_*", "few64_*", "ir_*"),
  ),
  bars.Compile("compile under 1 s", limit_s=1.0),
)
