"""ScatterNDUpdate-3: jaxops.scatter_nd_update vs `data.at[columns].set`.

Index tuples are drawn without replacement, so every formulation (default
last-wins semantics and `unique_indices=True`) must agree bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

import jaxops
from bench import runtimes
from bench.harness import Case, Traffic, small_ints

FUNCTION = "scatter_nd_update"


def plain(data, indices, updates):
  columns = tuple(indices[..., j] for j in range(indices.shape[-1]))
  return data.at[columns].set(updates)


def case(name, tier, data_shape, indices_shape, *, sweep=None, size=None,
         grad=True, peers=True):
  k = indices_shape[-1]
  lead = indices_shape[:-1]
  updates_shape = tuple(lead) + tuple(data_shape[k:])
  tuples = math.prod(lead)
  slice_elems = math.prod(data_shape[k:])

  def make_inputs(rng):
    data = small_ints(rng, data_shape, 3)
    flat = rng.choice(math.prod(data_shape[:k]), size=tuples, replace=False)
    indices = np.stack(np.unravel_index(flat, data_shape[:k]), axis=-1)
    indices = indices.reshape(indices_shape).astype(np.int32)
    updates = small_ints(rng, updates_shape, 3)
    return data, indices, updates

  data_bytes = 4 * math.prod(data_shape)
  # Donated: read indices and updates, write the updated slices in place.
  traffic = Traffic.random(
      streamed=4 * math.prod(indices_shape) + 4 * tuples * slice_elems,
      accesses=tuples, access_bytes=4 * slice_elems, cap=data_bytes,
      copy=2 * data_bytes)
  return Case(
      op="scatter_nd_update", name=name, tier=tier,
      shapes=f"data {list(data_shape)}, indices {list(indices_shape)}, "
      f"updates {list(updates_shape)}",
      make_inputs=make_inputs,
      forms={
          "jaxops": lambda d, i, u: jaxops.scatter_nd_update(d, i, u),
          "jaxops_unique": lambda d, i, u: jaxops.scatter_nd_update(
              d, i, u, unique_indices=True),
          "plain": plain,
      },
      diff_argnums=(0, 2), traffic=traffic, donate_argnum=0,
      openvino=lambda d, i, u: runtimes.openvino_opset().scatter_nd_update(d, i, u),
      onnx=lambda inputs: runtimes.onnx_model(
          [runtimes.onnx_node("ScatterND", ["x0", "x1", "x2"])], inputs),
      sweep=sweep, size=size, grad=grad, peers=peers)


def cases(smoke: bool) -> list[Case]:
  if smoke:
    out = [case("ir", "ir", (20, 16, 10, 15), (5, 25, 3)),
           case("large", "large", (64, 64), (512, 2))]
    side, updates, rows, fixed = 64, [16, 48, 160, 512, 1600], \
        [4, 12, 40, 128, 400], 32
  else:
    out = [case("ir", "ir", (1000, 256, 10, 15), (25, 125, 3)),
           case("large", "large", (4096, 4096), (262144, 2))]
    side, updates, rows, fixed = 4096, [2621, 8290, 26214, 82897, 262144], \
        [41, 130, 410, 1295, 4096], 16384
  # Donated time must follow the number of updates (first sweep) and not the
  # data size (second sweep, fixed number of updates).
  out += [case(f"sweep_updates{n}", "sweep", (side, side), (n, 2),
               sweep="updates", size=n, grad=False, peers=False)
          for n in updates]
  out += [case(f"sweep_rows{r}", "sweep", (r, side), (fixed, 2),
               sweep="data_elements", size=r * side, grad=False, peers=False)
          for r in rows]
  return out
