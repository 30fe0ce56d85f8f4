"""Slice-8: jaxops.slice vs Python slicing of a jax.Array.

Each case is written twice, as Slice-8 attributes and as the equivalent
Python index; the bit-exactness gate checks they agree. PyTorch takes no
negative step: its form slices the same elements with a positive step and
`flip`s (bench.ops.strided_slice's PyTorch form). OpenVINO gets Slice-8 with
Constant attributes, onnxruntime Slice-13 with initializers. The vmap case
compares `jax.vmap(jaxops.slice)` with the same slice of data with a
leading dim.
"""

from __future__ import annotations

import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import Case, Traffic, small_ints, vmap_case
from bench.ops import strided_slice


def _index(data_shape, start, stop, step, axes):
  index = [slice(None)] * len(data_shape)
  for a, b, e, k in zip(axes, start, stop, step):
    # Python's slice agrees with the ONNX clamp for these in-range starts.
    index[a] = slice(b, None if e <= -(2**62) or e >= 2**62 else e, k)
  return tuple(index)


def case(name, tier, data_shape, start, stop, step, axes, *, peers=True):
  index = _index(data_shape, start, stop, step, axes)

  def make_inputs(rng):
    return (small_ints(rng, data_shape, 3),)

  out_elems = np.empty(data_shape, np.bool_)[index].size
  traffic = Traffic(
    streamed=4 * out_elems, random_useful=4 * out_elems, random_lines=0
  )
  consts = {
    "starts": np.asarray(start, np.int64),
    "ends": np.asarray(stop, np.int64),
    "axes": np.asarray(axes, np.int64),
    "steps": np.asarray(step, np.int64),
  }
  return Case(
    op="slice",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, start {list(start)}, stop "
    f"{list(stop)}, step {list(step)}, axes {list(axes)}",
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d: jaxops.slice(d, start, stop, step, axes),
      "plain": lambda d: d[index],
    },
    diff_argnums=(0,),
    traffic=traffic,
    openvino=lambda d: runtimes.openvino_opset().slice(
      d, *(consts[k] for k in ("starts", "ends", "steps", "axes"))
    ),
    onnx=lambda inputs: runtimes.onnx_model(
      [runtimes.onnx_node("Slice", ["x0", "starts", "ends", "axes", "steps"])],
      inputs,
      consts,
    ),
    torch=strided_slice._torch_form(data_shape, index),
    peers=peers,
  )


# data[:, ::-2, ::3] (stop INT64_MIN: "before element 0").
_LARGE = dict(
  start=[-1, 0], stop=[-(2**63), 2**63 - 1], step=[-2, 3], axes=[1, 2]
)


def cases(smoke: bool) -> list[Case]:
  large = (4, 64, 256) if smoke else (64, 512, 512)
  vmap_data, batch = ((16, 64), 4) if smoke else ((512, 512), 16)
  base = case("vmap", "vmap", (4, *vmap_data), **_LARGE)
  lead = dict(_LARGE, axes=[2, 3])
  return [
    # The spec's Example 11: [20, 10, 5] -> [4, 10, 5].
    case(
      "ir_example_11",
      "ir",
      (20, 10, 5),
      [0, 0, 0],
      [4, 10, 5],
      [1, 1, 1],
      [0, 1, 2],
    ),
    case("large_negative_step", "large", large, **_LARGE),
    vmap_case(
      base,
      "vmap_data",
      batch,
      (0,),
      lambda d: jaxops.slice(d, **lead),
    ),
  ]


BARS = (
  *bars.peer_bars(),
  bars.vmap_bar("the same slice with a leading dim"),
  bars.Compile("compile under 2 s"),
)
