"""GatherElements-11/13: jaxops.gather_elements vs jnp.take_along_axis."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import jaxops
from bench import runtimes
from bench.harness import Case, Traffic, small_ints

FUNCTION = "gather_elements"


def case(name, tier, data_shape, indices_shape, axis, *, sweep=None,
         size=None, grad=True, peers=True):

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    indices = rng.integers(0, data_shape[axis],
                           size=indices_shape).astype(np.int32)
    return data, indices

  n = math.prod(indices_shape)
  # Each output element reads one random element of its row/column; they can
  # reach only the part of data that the indices' other dims cover.
  reachable = math.prod(data_shape[d] if d == axis else indices_shape[d]
                        for d in range(len(data_shape)))
  traffic = Traffic.random(streamed=4 * n + 4 * n, accesses=n,
                           access_bytes=4, cap=4 * reachable)
  return Case(
      op="gather_elements", name=name, tier=tier,
      shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
      f"axis={axis}",
      make_inputs=make_inputs,
      forms={"jaxops": lambda d, i: jaxops.gather_elements(d, i, axis=axis),
             "plain": lambda d, i: jnp.take_along_axis(d, i, axis=axis)},
      diff_argnums=(0,), traffic=traffic,
      openvino=lambda d, i: runtimes.openvino_opset().gather_elements(d, i, axis),
      onnx=lambda inputs: runtimes.onnx_model(
          [runtimes.onnx_node("GatherElements", ["x0", "x1"], axis=axis)], inputs),
      sweep=sweep, size=size, grad=grad, peers=peers)


def cases(smoke: bool) -> list[Case]:
  if smoke:
    out = [case("axis1", "large", (64, 32), (64, 8), 1),
           case("axis0", "large", (32, 64), (8, 64), 0)]
    rows = [4, 12, 40, 128, 400]
    cols = (32, 8)
  else:
    out = [case("axis1", "large", (4096, 1024), (4096, 256), 1),
           case("axis0", "large", (1024, 4096), (256, 4096), 0),
           # The compile-time check: a long gathered axis must not grow the
           # program (no one-hot / choose formulation).
           case("axis8192", "large", (64, 8192), (64, 8192), 1)]
    rows = [41, 130, 410, 1295, 4096]
    cols = (1024, 256)
  out += [case(f"sweep_rows{r}", "sweep", (r, cols[0]), (r, cols[1]), 1,
               sweep="indices", size=r * cols[1], grad=False, peers=False)
          for r in rows]
  return out
