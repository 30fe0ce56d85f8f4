"""GatherND-8: jaxops.gather_nd vs `data[batch_iotas + index_columns]`.

Forms: `jaxops` (default `mode="fill"`), `jaxops_clip` (`mode="clip"`: the
same result for in-range indices, without the out-of-range fill), `plain`
(NumPy-style advanced indexing, batch dims as broadcast aranges) and, for
PyTorch, the same advanced indexing on tensors. The vmap cases compare
`jax.vmap(jaxops.gather_nd)` with the equivalent single call, which has one
more batch dim (`batch_dims + 1`; a shared argument is broadcast to the
batch), and with a Python loop of jitted calls.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import (
  Case,
  Traffic,
  broadcast_batch,
  small_ints,
  sweep_case,
  vmap_cases,
)


def plain(data, indices, batch_dims):
  """NumPy-style advanced indexing; batch dims as broadcast aranges."""
  lead = indices.ndim - 1
  batch = tuple(
    jnp.arange(data.shape[d], dtype=indices.dtype).reshape(
      [-1 if j == d else 1 for j in range(lead)]
    )
    for d in range(batch_dims)
  )
  columns = tuple(indices[..., j] for j in range(indices.shape[-1]))
  return data[batch + columns]


def torch_form(batch_dims):
  """`plain` on PyTorch tensors."""

  def fn(data, indices):
    import torch

    lead = indices.dim() - 1
    batch = tuple(
      torch.arange(data.shape[d]).reshape(
        [-1 if j == d else 1 for j in range(lead)]
      )
      for d in range(batch_dims)
    )
    columns = tuple(indices[..., j] for j in range(indices.shape[-1]))
    return data[batch + columns]

  return fn


def case(name, tier, data_shape, indices_shape, batch_dims):
  b = batch_dims
  k = indices_shape[-1]
  sizes = np.asarray(data_shape[b : b + k])

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    indices = rng.integers(0, sizes, size=indices_shape).astype(np.int32)
    return data, indices

  slice_elems = math.prod(data_shape[b + k :])
  tuples = math.prod(indices_shape[:-1])
  traffic = Traffic.indexed(
    math.prod(indices_shape), tuples, slice_elems, math.prod(data_shape)
  )
  return Case(
    op="gather_nd",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
    f"batch_dims={b}",
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d, i: jaxops.gather_nd(d, i, batch_dims=b),
      "jaxops_clip": lambda d, i: jaxops.gather_nd(
        d, i, batch_dims=b, mode="clip"
      ),
      "plain": lambda d, i: plain(d, i, b),
    },
    diff_argnums=(0,),
    traffic=traffic,
    openvino=lambda d, i: runtimes.openvino_opset().gather_nd(
      d, i, batch_dims=b
    ),
    onnx=lambda inputs: runtimes.onnx_model(
      [runtimes.onnx_node("GatherND", ["x0", "x1"], batch_dims=b)], inputs
    ),
    torch=torch_form(b),
    grad_forms=("jaxops", "plain"),
  )


def batched_cases(batch, data_shape, indices_shape) -> list[Case]:
  """vmap over data and indices, data only, indices only (batch_dims 0)."""
  base = case("vmap", "vmap", data_shape, indices_shape, 0)
  return vmap_cases(
    base,
    batch,
    {
      "vmap_both": ((0, 0), lambda d, i: jaxops.gather_nd(d, i, batch_dims=1)),
      "vmap_data": (
        (0, None),
        lambda d, i: jaxops.gather_nd(
          d, broadcast_batch(i, batch), batch_dims=1
        ),
      ),
      # With batch_dims=0 the batch of index arrays is just more tuples.
      "vmap_indices": ((None, 0), lambda d, i: jaxops.gather_nd(d, i)),
    },
    forms=("jaxops", "jaxops_clip"),
  )


def cases(smoke: bool) -> list[Case]:
  if smoke:
    out = [
      case("ir_b0", "ir", (10, 6, 4, 5), (5, 7, 3), 0),
      case("ir_b2", "ir", (3, 2, 10, 5), (3, 2, 3, 1), 2),
      case("large", "large", (64, 64), (512, 2), 0),
    ]
    sweep = [100, 300, 1000, 3000, 10000]
    data = (64, 64)
    out += batched_cases(4, (16, 16), (32, 2))
  else:
    out = [
      case("ir_b0", "ir", (1000, 256, 10, 15), (25, 125, 3), 0),
      case("ir_b2", "ir", (30, 2, 100, 35), (30, 2, 3, 1), 2),
      case("ir_b3", "ir", (1, 64, 64, 320), (1, 64, 64, 1, 1), 3),
      case("large", "large", (4096, 4096), (1048576, 2), 0),
    ]
    sweep = [10486, 33159, 104858, 331582, 1048576]
    data = (4096, 4096)
    out += batched_cases(32, (256, 256), (8192, 2))
  out += [
    sweep_case(case(f"sweep_n{n}", "sweep", data, (n, 2), 0), "tuples", n)
    for n in sweep
  ]
  return out


BARS = (
  *bars.GATHER_BARS,
  bars.vmap_bar("the equivalent batch_dims + 1 call"),
  bars.Compile("compile under 2 s"),
)
