"""ScatterElementsUpdate-12 reductions: jaxops.scatter_elements_update vs
plain `.at[].add/.max` and the runtimes.

Cases (all along axis 0, repeated targets everywhere):

* `graph_sum`, `graph_max`: a graph layer, edge messages of F features
  reduced into the nodes (indices the destination node broadcast over the
  features);
* `segment_mean`: one value per element reduced into segments, `mean` with
  data as the initial value (plain: `.at[].add` of the values and of the
  counts, then a division; PyTorch `scatter_reduce(include_self=True)`;
  onnxruntime has no mean);
* `segment_mean_sorted`: the same with ascending segment ids (as
  `jnp.unique` or a batch of graphs gives them);
* `few64`: 1M updates into 64 targets;
* `ir`: the spec's 3x3 example with `sum`.

Values are small integers (`small_ints`), so every order of summation gives
the same float and every formulation must agree bit for bit: jaxops' serial
order and plain JAX's unspecified one. The peers run on one thread (their
reductions are serial; onnxruntime's ScatterElements is sequential, its
ScatterND reductions race on more: docs/export.md#scatter-reductions), and
onnxruntime also on the run's threads (`onnxruntime.threads`), its result
marked when wrong.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import (
  LOSS_ORDER,
  TIES_SPLIT,
  Case,
  Traffic,
  loss_left_out,
  small_ints,
  tied_extrema,
)

_TORCH = {"sum": "sum", "max": "amax", "mean": "mean"}
_ONNX = {"sum": "add", "max": "max"}


def _at(d, i):
  """`d.at[...]` at the targets of indices scattered along axis 0."""
  if i.ndim == 1:
    return d.at[i]
  columns = jnp.broadcast_to(jnp.arange(i.shape[1], dtype=i.dtype), i.shape)
  return d.at[i, columns]


def plain(reduction):
  """The plain-JAX formulation a user would write."""
  if reduction == "sum":
    return lambda d, i, u: _at(d, i).add(u)
  if reduction == "max":
    return lambda d, i, u: _at(d, i).max(u)
  # mean with data as the initial value: sums and counts, then a division.
  return lambda d, i, u: (
    _at(d, i).add(u) / _at(jnp.ones_like(d), i).add(jnp.ones_like(u))
  )


def _ties(inputs, out):
  """`tied_extrema` of a scatter along axis 0."""
  data, indices, updates = inputs
  others = np.indices(indices.shape)[1:]
  targets = np.ravel_multi_index((indices, *others), data.shape)
  return tied_extrema(data, targets, updates, out)


def case(name, tier, data_shape, n, reduction, *, grad=True, ascending=False):
  """`n` updates along axis 0 into data of `data_shape`, uniform targets
  (sorted when `ascending`)."""
  index_shape = (n,) + tuple(data_shape[1:])

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    rows = rng.integers(0, data_shape[0], n).astype(np.int32)
    if ascending:
      rows.sort()
    indices = np.array(
      np.broadcast_to(
        rows.reshape((n,) + (1,) * (len(data_shape) - 1)), index_shape
      )
    )
    return data, indices, small_ints(rng, index_shape, 3)

  elems = math.prod(index_shape)
  traffic = Traffic.indexed(
    elems, elems, 1, math.prod(data_shape), copy_data=True
  )
  torch_reduce = _TORCH[reduction]

  def torch_form(d, i, u):
    return d.scatter_reduce(0, i, u, torch_reduce, include_self=True)

  onnx_reduction = _ONNX.get(reduction)
  return Case(
    op="scatter_elements_update",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices/updates {list(index_shape)}, "
    f"reduction {reduction}, {n} updates into {data_shape[0]} rows"
    + (", ascending" if ascending else ""),
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d, i, u: jaxops.scatter_elements_update(
        d, i, u, 0, reduction=reduction
      ),
      "plain": plain(reduction),
    },
    diff_argnums=(0, 2),
    traffic=traffic,
    openvino=lambda d, i, u: _opset12().scatter_elements_update(
      d, i, u, np.int64(0), reduction, True
    ),
    onnx=None
    if onnx_reduction is None
    else lambda inputs: runtimes.onnx_model(
      [
        runtimes.onnx_node(
          "ScatterElements",
          ["x0", "x1", "x2"],
          axis=0,
          reduction=onnx_reduction,
        )
      ],
      inputs,
    ),
    torch=torch_form,
    peer_threads=1,
    threaded_peer=True,
    unique=False,
    excluded={}
    if onnx_reduction
    else {
      name: "ONNX ScatterElements has no mean"
      for name in ("onnxruntime", "onnxruntime.threads")
    },
    grad=grad,
    # Plain autodiff of .at[].max splits the gradient among tied elements;
    # jaxops gives it to the one that produced the result: not comparable.
    grad_forms=("jaxops",) if reduction == "max" else None,
    # PyTorch's amax splits it too: compared where nothing ties; and the
    # loss of means rounds in each one's order of summation.
    peer_grad_convention={
      "max": (TIES_SPLIT, _ties),
      "mean": (LOSS_ORDER, loss_left_out),
    }.get(reduction),
  )


def _opset12():
  import openvino.opset12 as ops

  return ops


def cases(smoke: bool) -> list[Case]:
  if smoke:
    nodes, edges, features, segments, few = 100, 1000, 8, 50, 2000
  else:
    nodes, edges, features, segments, few = (
      100_000,
      1_000_000,
      16,
      100_000,
      1_000_000,
    )
  return [
    case("ir", "ir", (3, 3), 2, "sum"),
    case("graph_sum", "large", (nodes, features), edges, "sum"),
    case("graph_max", "large", (nodes, features), edges, "max"),
    case("segment_mean", "large", (segments,), edges, "mean"),
    case(
      "segment_mean_sorted", "large", (segments,), edges, "mean", ascending=True
    ),
    case("few64", "large", (64,), few, "sum"),
  ]


BARS = (
  bars.reduction_peer_bar(),
  bars.VsPeers(
    "IR-example forward within 1.5x of the fastest peer whose result is right",
    at_most=1.5,
    tiers=("ir",),
    one_thread=True,
  ),
  bars.Ratio(
    "within 1.15x of plain .at[].add/.max (mean: sums and counts)",
    (("jaxops", "plain"),),
    at_most=1.15,
  ),
  bars.Ratio(
    "fwd+bwd at or ahead of plain autodiff",
    (("jaxops.grad", "plain.grad"),),
    at_most=1.0,
  ),
  bars.Compile("compile under 1 s", limit_s=1.0),
)
