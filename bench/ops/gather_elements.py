"""GatherElements-11/13: jaxops.gather_elements vs jnp.take_along_axis.

Forms: `jaxops` (default `mode="fill"`), `jaxops_clip` (`mode="clip"`),
`plain` (`jnp.take_along_axis`) and, for PyTorch, `torch.gather`. The vmap
cases compare `jax.vmap(jaxops.gather_elements)` with the equivalent single
call on one more leading axis (`axis + 1`; a shared argument is broadcast to
the batch) and with a Python loop of jitted calls.
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


def case(name, tier, data_shape, indices_shape, axis):

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    indices = rng.integers(0, data_shape[axis], size=indices_shape).astype(
      np.int32
    )
    return data, indices

  n = math.prod(indices_shape)
  # Each output element reads one random element of its row/column; they can
  # reach only the part of data that the indices' other dims cover.
  reachable = math.prod(
    data_shape[d] if d == axis else indices_shape[d]
    for d in range(len(data_shape))
  )
  traffic = Traffic.indexed(n, n, 1, reachable)

  def torch_form(d, i):
    import torch

    return torch.gather(d, axis, i)

  return Case(
    op="gather_elements",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
    f"axis={axis}",
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d, i: jaxops.gather_elements(d, i, axis=axis),
      "jaxops_clip": lambda d, i: jaxops.gather_elements(
        d, i, axis=axis, mode="clip"
      ),
      "plain": lambda d, i: jnp.take_along_axis(d, i, axis=axis),
    },
    diff_argnums=(0,),
    traffic=traffic,
    openvino=lambda d, i: runtimes.openvino_opset().gather_elements(d, i, axis),
    onnx=lambda inputs: runtimes.onnx_model(
      [runtimes.onnx_node("GatherElements", ["x0", "x1"], axis=axis)], inputs
    ),
    torch=torch_form,
    grad_forms=("jaxops", "plain"),
  )


def batched_cases(batch, data_shape, indices_shape, axis) -> list[Case]:
  """vmap over data and indices, data only, indices only."""
  base = case("vmap", "vmap", data_shape, indices_shape, axis)
  a = axis + 1
  return vmap_cases(
    base,
    batch,
    {
      "vmap_both": ((0, 0), lambda d, i: jaxops.gather_elements(d, i, axis=a)),
      "vmap_data": (
        (0, None),
        lambda d, i: jaxops.gather_elements(
          d, broadcast_batch(i, batch), axis=a
        ),
      ),
      "vmap_indices": (
        (None, 0),
        lambda d, i: jaxops.gather_elements(
          broadcast_batch(d, batch), i, axis=a
        ),
      ),
    },
    forms=("jaxops", "jaxops_clip"),
  )


def cases(smoke: bool) -> list[Case]:
  # The spec's second example (data 3x3, indices 2x3, axis 0): a call that is
  # all dispatch.
  out = [case("ir_example", "ir", (3, 3), (2, 3), 0)]
  if smoke:
    out += [
      case("axis1", "large", (64, 32), (64, 8), 1),
      case("axis0", "large", (32, 64), (8, 64), 0),
    ]
    rows = [4, 12, 40, 128, 400]
    cols = (32, 8)
    out += batched_cases(4, (16, 16), (16, 4), 1)
  else:
    out += [
      case("axis1", "large", (4096, 1024), (4096, 256), 1),
      case("axis0", "large", (1024, 4096), (256, 4096), 0),
      # The compile-time check: a long gathered axis must not grow the
      # program (no one-hot / choose formulation).
      case("axis8192", "large", (64, 8192), (64, 8192), 1),
    ]
    rows = [41, 130, 410, 1295, 4096]
    cols = (1024, 256)
    out += batched_cases(32, (256, 256), (256, 64), 1)
  out += [
    sweep_case(
      case(f"sweep_rows{r}", "sweep", (r, cols[0]), (r, cols[1]), 1),
      "indices",
      r * cols[1],
    )
    for r in rows
  ]
  return out


BARS = (
  *bars.GATHER_BARS,
  bars.vmap_bar("the equivalent call on axis + 1"),
  bars.Compile("compile under 2 s (including the 8192-long gathered axis)"),
)
