"""StridedSlice-1: jaxops.strided_slice vs NumPy-style basic slicing.

Each case is written twice, as StridedSlice attributes and as the equivalent
Python index (ints shrink, slices keep); the bit-exactness gate checks they
agree. onnxruntime has no shrink, so its model is Slice followed by Squeeze
(a free reshape) where the case shrinks a dim. PyTorch slicing takes no
negative step: its form slices the same elements with a positive step, then
`flip`s those dims (a copy); without a flip it `clone`s the slice, since a
PyTorch slice is a view of its input while every other variant writes its
output (XLA never returns a view of a non-donated input).
The vmap case compares `jax.vmap(jaxops.strided_slice)` with the same slice
given one more leading dim (begin/end masked).
"""

from __future__ import annotations

import math

import numpy as np

import jaxops
from bench import bars, runtimes
from bench.harness import (
  CACHE_LINE,
  Case,
  Traffic,
  small_ints,
  sweep_case,
  vmap_case,
)


def _line_traffic(data_shape, index) -> tuple[int, int]:
  """(bytes of selected elements, bytes of the cache lines holding them)."""
  offsets = np.arange(math.prod(data_shape), dtype=np.int64).reshape(
    data_shape
  )[index]
  lines = np.unique(offsets.ravel() * 4 // CACHE_LINE).size
  return 4 * offsets.size, CACHE_LINE * lines


def _onnx(inputs, data_shape, index):
  """Slice (+ Squeeze for int entries) equivalent to `data[index]`."""
  from onnx import helper

  starts, ends, steps, squeeze = [], [], [], []
  for axis, entry in enumerate(index):
    if isinstance(entry, int):
      entry, _ = slice(entry, entry + 1, 1), squeeze.append(axis)
    start, stop, step = entry.indices(data_shape[axis])
    if step < 0 and stop < 0:
      stop = -(2**63)  # "before the first element" for a negative step
    starts.append(start)
    ends.append(stop)
    steps.append(step)
  consts = {
    "starts": starts,
    "ends": ends,
    "axes": list(range(len(index))),
    "steps": steps,
  }
  inits = {k: np.asarray(v, np.int64) for k, v in consts.items()}
  out = "s" if squeeze else "y"
  nodes = [
    helper.make_node("Slice", ["x0", "starts", "ends", "axes", "steps"], [out])
  ]
  if squeeze:
    inits["squeeze_axes"] = np.asarray(squeeze, np.int64)
    nodes.append(helper.make_node("Squeeze", ["s", "squeeze_axes"], ["y"]))
  return runtimes.onnx_model(nodes, inputs, inits)


def _torch_form(data_shape, index):
  """`data[index]` for PyTorch: positive steps, then `flip`."""
  positive, flips, out_dim = [], [], 0
  for axis, entry in enumerate(index):
    if isinstance(entry, int):
      positive.append(entry)
      continue
    picked = range(*entry.indices(data_shape[axis]))
    if entry.step is not None and entry.step < 0 and len(picked):
      positive.append(slice(picked[-1], picked[0] + 1, -picked.step))
      flips.append(out_dim)
    else:
      positive.append(
        slice(picked.start, picked.stop, picked.step)
        if len(picked)
        else slice(0, 0)
      )
    out_dim += 1
  positive = tuple(positive)

  def fn(data):
    import torch

    out = data[positive]
    return (
      out.flip(flips)
      if flips
      else out.clone(memory_format=torch.contiguous_format)
    )

  return fn


def case(name, tier, data_shape, attrs, index):
  """`attrs`: begin, end, strides and masks; `index`: the Python index."""
  rank = len(attrs["begin"])
  masks = {
    m: list(attrs.get(m, [0] * rank))
    for m in (
      "begin_mask",
      "end_mask",
      "new_axis_mask",
      "shrink_axis_mask",
      "ellipsis_mask",
    )
  }
  begin, end, strides = attrs["begin"], attrs["end"], attrs["strides"]

  def make_inputs(rng):
    return (small_ints(rng, data_shape, 3),)

  useful, lines = _line_traffic(data_shape, index)
  # The output is written once; the read side needs the selected elements
  # (floor) or the cache lines holding them (line floor).
  traffic = Traffic(streamed=useful, random_useful=useful, random_lines=lines)
  return Case(
    op="strided_slice",
    name=name,
    tier=tier,
    shapes=f"data {list(data_shape)}, begin {begin}, end {end}, "
    f"strides {strides}, "
    + ", ".join(f"{k}={v}" for k, v in masks.items() if any(v)),
    make_inputs=make_inputs,
    forms={
      "jaxops": lambda d: jaxops.strided_slice(d, begin, end, strides, **masks),
      "plain": lambda d: d[index],
    },
    diff_argnums=(0,),
    traffic=traffic,
    openvino=lambda d: runtimes.openvino_opset().strided_slice(
      d,
      np.asarray(begin, np.int64),
      np.asarray(end, np.int64),
      np.asarray(strides, np.int64),
      **masks,
    ),
    onnx=lambda inputs: _onnx(inputs, data_shape, index),
    torch=_torch_form(data_shape, index),
  )


# array[0:1, 0, 0:384, 0:640, 0:8], the shrink_axis_mask example of the spec.
_IR = dict(
  begin=[0, 0, 0, 0, 0],
  end=[1, 0, 384, 640, 8],
  strides=[1, 1, 1, 1, 1],
  shrink_axis_mask=[0, 1, 0, 0, 0],
)
_IR_INDEX = (slice(0, 1), 0, slice(0, 384), slice(0, 640), slice(0, 8))
# array[::2, 1:64:2, ::-1, 0:64:2]: stride 2 in three dims, -1 in one.
_LARGE = dict(
  begin=[0, 1, 0, 0],
  end=[0, 64, 0, 64],
  strides=[2, 2, -1, 2],
  begin_mask=[1, 0, 1, 0],
  end_mask=[1, 0, 1, 0],
)
_LARGE_INDEX = (
  slice(None, None, 2),
  slice(1, 64, 2),
  slice(None, None, -1),
  slice(0, 64, 2),
)


def vmap_slice(batch, data_shape) -> Case:
  """`_LARGE` under vmap vs the same slice with a leading full dim."""
  base = case("vmap", "vmap", data_shape, _LARGE, _LARGE_INDEX)
  lead = dict(
    begin=[0, *_LARGE["begin"]],
    end=[0, *_LARGE["end"]],
    strides=[1, *_LARGE["strides"]],
    begin_mask=[1, *_LARGE["begin_mask"]],
    end_mask=[1, *_LARGE["end_mask"]],
  )
  return vmap_case(
    base, "vmap_data", batch, (0,), lambda d: jaxops.strided_slice(d, **lead)
  )


def cases(smoke: bool) -> list[Case]:
  if smoke:
    ir_shape, sweep = (1, 2, 12, 20, 8), [2, 4, 8, 16, 32]
    large = 4
    tail = (64, 16, 64)
  else:
    ir_shape, sweep = (1, 2, 384, 640, 8), [2, 6, 20, 64, 200]
    large = 64
    tail = (64, 64, 64)
  ir_attrs = dict(_IR, end=[1, 0, *ir_shape[2:]])
  out = [
    case("ir_shrink", "ir", ir_shape, ir_attrs, _IR_INDEX),
    case("large", "large", (large, *tail), _LARGE, _LARGE_INDEX),
    vmap_slice(4, (2, 16, 16, 16))
    if smoke
    else vmap_slice(16, (2, 32, 64, 64)),
  ]
  out += [
    sweep_case(
      case(f"sweep_n{n}", "sweep", (n, *tail), _LARGE, _LARGE_INDEX),
      "data_elements",
      n * math.prod(tail),
    )
    for n in sweep
  ]
  return out


BARS = (
  *bars.peer_bars(),
  bars.vmap_bar("the same slice with a leading dim"),
  bars.Compile("compile under 2 s"),
)
