"""A NumPy reference for Slice-8 and seeded random Slice-8 specs.

`np_slice` writes the clamp from the ONNX Slice text (the rule the OpenVINO
and ONNX runtimes follow, docs/semantics.md#slice) and then lists the kept
positions with Python's `range`, sharing nothing with
`jaxops._slicing.slice_dim`; exact for every int64 value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def onnx_positions(size: int, start: int, stop: int, step: int) -> range:
  """The positions one dim keeps, by the ONNX Slice text: negative start and
  stop get `size` added; a positive step clamps both into `[0, size]`, a
  negative one start into `[0, size - 1]` and stop into `[-1, size - 1]`."""
  if start < 0:
    start += size
  if stop < 0:
    stop += size
  if step > 0:
    start = min(max(start, 0), size)
    stop = min(max(stop, 0), size)
  else:
    start = min(max(start, 0), size - 1)
    stop = min(max(stop, -1), size - 1)
  return range(start, stop, step)


def np_slice(
  data: np.ndarray,
  start: Sequence[int],
  stop: Sequence[int],
  step: Sequence[int],
  axes: Sequence[int] | None = None,
) -> np.ndarray:
  """Slice-8 of `data`: one `np.take` of the kept positions per axis."""
  out = np.asarray(data)
  if axes is None:
    axes = range(len(start))
  for axis, b, e, k in zip(axes, start, stop, step):
    axis %= out.ndim
    positions = onnx_positions(out.shape[axis], b, e, k)
    out = np.take(out, np.array(list(positions), np.int64), axis=axis)
  return out


@dataclasses.dataclass(frozen=True)
class SliceSpec:
  data_shape: tuple[int, ...]
  start: tuple[int, ...]
  stop: tuple[int, ...]
  step: tuple[int, ...]
  axes: tuple[int, ...] | None

  def describe(self) -> str:
    return (
      f"data {self.data_shape} start={self.start} stop={self.stop} "
      f"step={self.step} axes={self.axes}"
    )


def _value(rng: np.random.Generator, size: int) -> int:
  """A start or stop: in range, near the ends, beyond them, or an int64
  limit."""
  kind = rng.random()
  if kind < 0.1:
    return INT64_MIN if rng.random() < 0.5 else INT64_MAX
  return int(rng.integers(-2 * size - 2, 2 * size + 3))


def random_spec(
  rng: np.random.Generator, max_rank: int = 5, max_dim: int = 5
) -> SliceSpec:
  """A random valid Slice-8 spec: rank 1..max_rank (dims 0..max_dim, rarely
  0), a random subset of the axes in random order (negative half the time,
  omitted when it is `0..M-1` a third of the time), starts and stops in and
  out of range and at the int64 limits, steps in [-3, 3] \\ {0} or
  occasionally an int64 limit."""
  r = int(rng.integers(1, max_rank + 1))
  shape = tuple(
    int(d) if rng.random() > 0.05 else 0
    for d in rng.integers(1, max_dim + 1, size=r)
  )
  m = int(rng.integers(0, r + 1))
  chosen = [int(v) for v in rng.permutation(r)[:m]]
  if chosen == list(range(m)) and rng.random() < 0.5:
    axes = None
  else:
    axes = tuple(v - r if rng.random() < 0.5 else v for v in chosen)
  start = tuple(_value(rng, shape[a]) for a in chosen)
  stop = tuple(_value(rng, shape[a]) for a in chosen)
  step = []
  for _ in chosen:
    if rng.random() < 0.1:
      step.append(INT64_MIN if rng.random() < 0.5 else INT64_MAX)
    else:
      step.append(int(rng.choice([-3, -2, -1, 1, 2, 3])))
  return SliceSpec(shape, start, stop, tuple(step), axes)
