"""Gather-8: jaxops.gather vs `jnp.take` (batch dims as broadcast aranges).

Forms: `jaxops` (default `mode="fill"`: out-of-range indices read zeros),
`jaxops_clip` (`mode="clip"`, the same result for the in-range indices
drawn here) and `plain` (`jnp.take` along the axis for batch_dims 0;
advanced indexing with a broadcast arange per batch dim otherwise, the
axis right after the batch dims in every case here). PyTorch: `embedding`
for the embedding lookup, `index_select` for other batch_dims 0 cases,
advanced indexing with batch dims. onnxruntime: Gather(axis), or for batch
dims the exported composite (Cast, Unsqueeze, GatherND(batch_dims);
docs/export.md#gather). The vmap case compares `jax.vmap(jaxops.gather)`
over data and indices with the single call that has one more batch dim.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import Case, Traffic, small_ints, vmap_case


def plain(data, indices, axis, batch_dims):
  if batch_dims == 0:
    return jnp.take(data, indices, axis=axis)
  assert axis == batch_dims, "plain form: the axis follows the batch dims"
  lead = indices.ndim
  batch = tuple(
    jnp.arange(data.shape[d], dtype=indices.dtype).reshape(
      [-1 if j == d else 1 for j in range(lead)]
    )
    for d in range(batch_dims)
  )
  return data[batch + (indices,)]


def torch_form(axis, batch_dims, embedding):
  def fn(data, indices):
    import torch

    if embedding:
      return torch.nn.functional.embedding(indices, data)
    if batch_dims == 0:
      out = torch.index_select(data, axis, indices.reshape(-1))
      return out.reshape(
        data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
      )
    lead = indices.dim()
    batch = tuple(
      torch.arange(data.shape[d]).reshape(
        [-1 if j == d else 1 for j in range(lead)]
      )
      for d in range(batch_dims)
    )
    return data[batch + (indices,)]

  return fn


def _onnx(inputs, axis, batch_dims):
  from onnx import helper

  if batch_dims == 0:
    nodes = [runtimes.onnx_node("Gather", ["x0", "x1"], axis=axis)]
    return runtimes.onnx_model(nodes, inputs)
  nodes = [
    helper.make_node("Cast", ["x1"], ["i64"], to=7),
    helper.make_node("Unsqueeze", ["i64", "last"], ["tuples"]),
    runtimes.onnx_node("GatherND", ["x0", "tuples"], batch_dims=batch_dims),
  ]
  return runtimes.onnx_model(nodes, inputs, {"last": np.array([-1], np.int64)})


def case(
  name, tier, data_shape, indices_shape, axis=0, batch_dims=0, embedding=False
):
  b = batch_dims

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    indices = rng.integers(0, data_shape[axis], size=indices_shape)
    return data, indices.astype(np.int32)

  slice_elems = math.prod(data_shape[axis + 1 :])
  reads = math.prod(data_shape[b:axis]) * math.prod(indices_shape)
  traffic = Traffic.indexed(
    math.prod(indices_shape), reads, slice_elems, math.prod(data_shape)
  )
  return Case(
    op="gather",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
    f"axis={axis}, batch_dims={b}",
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d, i: jaxops.gather(d, i, axis, b),
      "jaxops_clip": lambda d, i: jaxops.gather(d, i, axis, b, mode="clip"),
      "plain": lambda d, i: plain(d, i, axis, b),
    },
    diff_argnums=(0,),
    traffic=traffic,
    openvino=lambda d, i: runtimes.openvino_opset().gather(
      d, i, runtimes.openvino_opset().constant(np.int64(axis)), b
    ),
    onnx=lambda inputs: _onnx(inputs, axis, b),
    torch=torch_form(axis, b, embedding),
    grad_forms=("jaxops", "plain"),
  )


def cases(smoke: bool) -> list[Case]:
  if smoke:
    table, ids = (1000, 32), (8, 64)
    select = ((4, 64, 16), (4, 16))
    batch, vmap_data, vmap_indices = 4, (64, 16), (32,)
  else:
    table, ids = (100000, 256), (64, 512)
    select = ((32, 2048, 256), (32, 512))
    batch, vmap_data, vmap_indices = 32, (4096, 64), (512,)
  base = case("vmap", "vmap", vmap_data, vmap_indices)
  return [
    # The spec's IR example: batch_dims 1, axis 1.
    case("ir_b1", "ir", (2, 64, 128), (2, 32, 21), 1, 1),
    case("embedding", "large", table, ids, embedding=True),
    case("batch_dims_1", "large", *select, 1, 1),
    vmap_case(
      base,
      "vmap_both",
      batch,
      (0, 0),
      lambda d, i: jaxops.gather(d, i, 1, 1),
      forms=("jaxops", "jaxops_clip"),
    ),
  ]


BARS = (
  *bars.GATHER_BARS,
  bars.Ratio(
    "fwd+bwd not behind autodiff of plain jnp.take / indexing",
    (("jaxops.grad", "plain.grad"),),
    at_most=1.0,
    tiers=("ir", "large"),
  ),
  bars.vmap_bar("the equivalent batch_dims + 1 call"),
  bars.Compile("compile under 2 s"),
)
