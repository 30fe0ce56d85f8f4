"""StridedSlice-1 cases shared by the unit and the conformance tests.

* `SPEC_EXAMPLES`: every example of the OpenVINO StridedSlice-1
  specification (its IR `<layer>` blocks and the examples in its prose), with
  the output the OpenVINO runtime gives (docs/semantics.md#errata; "erratum N"
  below is SS-N there), plus small stand-ins for the 10-/12-D ones that are
  too big to materialize.
* `random_spec(rng)`: a seeded random valid slice spec over ranks 1-5 with
  random mask combinations, including junk begin/end/stride values at the
  positions that ignore them and colliding mask bits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

MASK_NAMES = (
  "begin_mask",
  "end_mask",
  "new_axis_mask",
  "shrink_axis_mask",
  "ellipsis_mask",
)


@dataclasses.dataclass(frozen=True)
class Spec:
  """One StridedSlice-1 call: data shape, begin/end/strides and masks."""

  data_shape: tuple[int, ...]
  begin: tuple[int, ...]
  end: tuple[int, ...]
  strides: tuple[int, ...] | None = None
  begin_mask: tuple[int, ...] = ()
  end_mask: tuple[int, ...] = ()
  new_axis_mask: tuple[int, ...] = ()
  shrink_axis_mask: tuple[int, ...] = ()
  ellipsis_mask: tuple[int, ...] = ()

  def kwargs(self) -> dict[str, Any]:
    return {
      "strides": self.strides,
      **{name: getattr(self, name) for name in MASK_NAMES},
    }

  def padded_masks(self) -> dict[str, tuple[int, ...]]:
    """Masks zero-extended / truncated to M (the OpenVINO Python API needs
    equal lengths)."""
    m = len(self.begin)
    return {
      name: (tuple(getattr(self, name)) + (0,) * m)[:m] for name in MASK_NAMES
    }

  def full_strides(self) -> tuple[int, ...]:
    return self.strides if self.strides is not None else (1,) * len(self.begin)


def every_mask(data_shape: tuple[int, ...], last_begin: int) -> Spec:
  """x[1, np.newaxis, ..., last_begin::-1]: each mask kind in one spec."""
  return Spec(
    data_shape,
    (1, 0, 0, last_begin),
    (0, 0, 0, 0),
    (1, 1, 1, -1),
    end_mask=(0, 0, 0, 1),
    new_axis_mask=(0, 1),
    shrink_axis_mask=(1,),
    ellipsis_mask=(0, 0, 1),
  )


@dataclasses.dataclass(frozen=True)
class Example:
  name: str
  spec: Spec
  out_shape: tuple[int, ...]  # what the runtime gives (errata applied)
  # The same selection written as NumPy indexing of `x`, or None where the
  # data is too big to build (10-/12-D examples: shape checked only).
  numpy_index: Callable[[np.ndarray], np.ndarray] | None
  note: str = ""


_D12 = (10,) * 12
_D10 = (10,) * 10


def _with_stand_in(
  big: Example,
  data_shape: tuple[int, ...],
  out_shape: tuple[int, ...],
  numpy_index: Callable[[np.ndarray], np.ndarray],
) -> list[Example]:
  """`big` (data too big to build) and its spec on smaller `data_shape`,
  named `<big's name less its rank>_small`."""
  return [
    big,
    Example(
      big.name.rsplit("_", 1)[0] + "_small",
      dataclasses.replace(big.spec, data_shape=data_shape),
      out_shape,
      numpy_index,
      f"stand-in for {big.name}",
    ),
  ]


SPEC_EXAMPLES = [
  Example(
    "basic_6d",
    Spec(
      (4,) * 6, (0, 1, 0, 1, 3, 3), (4, 4, 4, 4, 0, 0), (1, 1, 2, 2, -1, -2)
    ),
    (4, 3, 2, 2, 3, 2),
    lambda x: x[0:4, 1:4, 0:4:2, 1:4:2, 3:0:-1, 3:0:-2],
    "erratum 3: 3:0:-1 keeps ids [3, 2, 1], not 4 elements",
  ),
  Example(
    "clamping_2d",
    Spec((2, 2), (1234, 2), (1234, 4321), (1, -1)),
    (0, 0),
    lambda x: x[2:3, 2:1:-1],
    "erratum 4: both dims are empty, not [1, 1]",
  ),
  Example(
    "negative_end_3d",
    Spec((2, 3, 4), (0, 0, 0), (2, 2, -1), (1, 1, 1)),
    (2, 2, 3),
    lambda x: x[0:2, 0:2, 0:-1],
  ),
  Example(
    "begin_end_mask_3d",
    Spec(
      (2, 3, 4),
      (1, 1, 123),
      (0, 0, 2),
      (1, 1, -1),
      begin_mask=(0, 1, 1),
      end_mask=(1, 1, 1),
      new_axis_mask=(0, 0, 0, 0, 0),
      shrink_axis_mask=(0, 0),
      ellipsis_mask=(0,),
    ),
    (1, 3, 4),
    lambda x: x[1:, :, ::-1],
    "erratum 2: ::-1 keeps ids [3, 2, 1, 0] (text: [1, 3, 3])",
  ),
  Example(
    "new_axis_2d",
    Spec(
      (2, 4),
      (1234, 0, -1, 0),
      (1234, 2, 9876, 4),
      (132, 1, 241, 1),
      (0, 0, 0, 0),
      (0, 0, 0, 0),
      (1, 0, 1, 0),
      (0, 0, 0, 0),
      (0, 0, 0, 0),
    ),
    (1, 2, 1, 4),
    lambda x: x[np.newaxis, 0:2, np.newaxis, 0:4],
  ),
  Example(
    "shrink_5d",
    Spec(
      (1, 2, 384, 640, 8),
      (0, 0, 0, 0, 0),
      (1, 0, 384, 640, 8),
      (1, 1, 1, 1, 1),
      (0,) * 5,
      (0,) * 5,
      (0,) * 5,
      (0, 1, 0, 0, 0),
      (0,) * 5,
    ),
    (1, 384, 640, 8),
    lambda x: x[0:1, 0, 0:384, 0:640, 0:8],
    "erratum 7: end[1]=0 == begin is not needed; end is ignored",
  ),
  *_with_stand_in(
    Example(
      "ellipsis_12d",
      Spec(
        _D12,
        (0, 0, 0),
        (4, 0, 5),
        (1, -1, 1),
        (0, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
        (0, 1, 0),
      ),
      (4,) + (10,) * 10 + (5,),
      None,
      "erratum 5: the text says 10-D but lists 12 dims",
    ),
    (6, 2, 3, 2, 7),
    (4, 2, 3, 2, 5),
    lambda x: x[0:4, ..., 0:5],
  ),
  *_with_stand_in(
    Example(
      "ellipsis_new_axis_12d",
      Spec(
        _D12,
        (2, 1, 10, 10),
        (123, 1, 10, 5),
        (1, -1, 1, 1),
        begin_mask=(0, 0, 1, 1),
        end_mask=(1, 1, 0, 0),
        new_axis_mask=(0, 0, 1),
        shrink_axis_mask=(0,),
        ellipsis_mask=(0, 1),
      ),
      (8,) + (10,) * 10 + (1, 5),
      None,
      "erratum 5: masks of different lengths (zero-extended); the ellipsis "
      "covers 12 - (4 - 1 - 1) = 10 dims, the output has rank 13",
    ),
    (12, 2, 3, 7),
    (10, 2, 3, 1, 5),
    lambda x: x[2:, ..., np.newaxis, :5],
  ),
  *_with_stand_in(
    Example(
      "first_and_last_10d",
      Spec(
        _D10,
        (0, 0, 0),
        (0, 0, 0),
        (1, 1, 1),
        shrink_axis_mask=(1, 0, 1),
        ellipsis_mask=(0, 1, 0),
      ),
      (10,) * 8,
      None,
      "the prose's [0, ..., 0] on 10-D (erratum 9: its spelled-out form has "
      "one colon too many)",
    ),
    (3, 2, 4, 5),
    (2, 4),
    lambda x: x[0, ..., 0],
  ),
  Example(
    "begin_below_minus_size_reverse",
    Spec((4,), (-10,), (-20,), (-1,)),
    (1,),
    lambda x: x[0:1],
    "erratum 8: begin clamps to 0 for a negative stride (Python: empty)",
  ),
  Example(
    "prose_negative_begin",
    Spec((4,), (-5,), (4,), (1,)),
    (4,),
    lambda x: x[-5:4],
    "the prose's begin -5 on size 4 -> -1 -> clamped to 0",
  ),
  Example(
    "begin_equals_end",
    Spec((4,), (2,), (2,), (1,)),
    (0,),
    lambda x: x[2:2],
    "erratum 1: size 0, not 1",
  ),
  Example(
    "begin_equals_end_shrink",
    Spec((4,), (2,), (2,), (1,), shrink_axis_mask=(1,)),
    (),
    lambda x: x[2],
    "erratum 1: only a shrink keeps one element",
  ),
  Example(
    "end_mask_reverse_runs_through_0",
    Spec((4,), (3,), (0,), (-1,), end_mask=(1,)),
    (4,),
    lambda x: x[3::-1],
  ),
  Example(
    "shrink_ignores_end_and_stride",
    Spec((3, 4), (-1, 1), (0, 3), (-3, 1), shrink_axis_mask=(1,)),
    (2,),
    lambda x: x[-1, 1:3],
    "erratum 7",
  ),
  Example(
    "new_axis_and_shrink_same_position",
    Spec(
      (3, 4), (0, 1), (0, 2), (1, 1), new_axis_mask=(1,), shrink_axis_mask=(1,)
    ),
    (1, 1, 4),
    lambda x: x[np.newaxis, 1:2],
    "erratum 6: new_axis wins (TF); the CPU plugin is wrong when trailing "
    "dims are implicit",
  ),
  Example(
    "new_axis_and_shrink_implicit_trailing",
    Spec(
      (3, 4, 5),
      (0, 1),
      (1, 2),
      (1, 1),
      new_axis_mask=(1, 0),
      shrink_axis_mask=(0, 1),
    ),
    (1, 4, 5),
    lambda x: x[np.newaxis, 1],
    "erratum 6: the CPU plugin returns garbage here",
  ),
  Example(
    "begin_mask_on_shrunk_dim",
    Spec((4, 4), (-1,), (2,), (-1,), begin_mask=(1,), shrink_axis_mask=(1,)),
    (4,),
    lambda x: x[-1],
    "erratum 10: begin_mask ignored on a shrunk dim (reference evaluator, "
    "TF); the CPU plugin takes element 0",
  ),
  Example(
    "ellipsis_and_new_axis_same_position",
    Spec(
      (3, 4, 5),
      (0, 1, 0),
      (1, 2, 0),
      (1, 1, 1),
      new_axis_mask=(1,),
      ellipsis_mask=(1,),
    ),
    (3, 1, 0),
    lambda x: x[..., 1:2, 0:0],
    "erratum 10: the ellipsis wins (TF, OpenVINO shape inference)",
  ),
  Example(
    "fewer_dims_named_keeps_rest",
    Spec((3, 4, 5), (1,), (3,), (1,)),
    (2, 4, 5),
    lambda x: x[1:3],
  ),
  Example(
    "zero_stride_ignored_at_new_axis_and_shrink",
    Spec(
      (3, 4),
      (0, 1, 0),
      (1, 2, 4),
      (0, 0, 1),
      new_axis_mask=(1,),
      shrink_axis_mask=(0, 1),
    ),
    (1, 4),
    lambda x: x[np.newaxis, 1, 0:4],
    "a zero stride is only an error where a stride is used",
  ),
]


def random_spec(rng: np.random.Generator, max_rank: int = 5) -> Spec:
  """A random valid spec: ranks 1..max_rank, dims 0..5, masks all mixed.

  Built entry by entry so that it is valid by construction (no call to the
  code under test): at most `rank` entries name data dims, shrink begins are
  in range, strides of slicing entries are nonzero. Positions that ignore
  begin/end/stride (new_axis, shrink, ellipsis) get junk there, zero strides
  included, and sometimes colliding mask bits (new_axis+shrink,
  ellipsis+new_axis, begin_mask on a shrunk dim).
  """
  rank = int(rng.integers(1, max_rank + 1))
  shape = tuple(
    int(d)
    for d in rng.choice(
      [0, 1, 2, 3, 4, 5], size=rank, p=[0.05, 0.15, 0.2, 0.2, 0.2, 0.2]
    )
  )
  named = int(rng.integers(0, rank + 1))
  kinds = ["named"] * named + ["new_axis"] * int(rng.integers(0, 3))
  rng.shuffle(kinds)
  use_ellipsis = rng.random() < 0.4
  if use_ellipsis:
    kinds.insert(int(rng.integers(0, len(kinds) + 1)), "ellipsis")
  if not kinds:
    kinds = ["new_axis"]
  m = len(kinds)
  begin, end, strides = [], [], []
  masks = {name: [0] * m for name in MASK_NAMES}
  # Dims named before the ellipsis map to the leading data dims, those after
  # it to the trailing ones.
  named_before = (
    kinds[: kinds.index("ellipsis")].count("named") if (use_ellipsis) else named
  )
  dim_of_entry, before, after = {}, 0, 0
  for i, kind in enumerate(kinds):
    if kind != "named":
      continue
    if before < named_before:
      dim_of_entry[i] = before
      before += 1
    else:
      dim_of_entry[i] = rank - (named - named_before) + after
      after += 1

  def junk():
    return int(rng.integers(-7, 8))

  for i, kind in enumerate(kinds):
    if kind == "ellipsis":
      masks["ellipsis_mask"][i] = 1
      begin.append(junk()), end.append(junk()), strides.append(junk())
      if rng.random() < 0.2:
        masks["new_axis_mask"][i] = 1
      if rng.random() < 0.2:
        masks["shrink_axis_mask"][i] = 1
    elif kind == "new_axis":
      masks["new_axis_mask"][i] = 1
      begin.append(junk()), end.append(junk()), strides.append(junk())
      if rng.random() < 0.25:
        masks["shrink_axis_mask"][i] = 1
      masks["begin_mask"][i] = int(rng.random() < 0.3)
      masks["end_mask"][i] = int(rng.random() < 0.3)
    else:
      size = shape[dim_of_entry[i]]
      if size > 0 and rng.random() < 0.3:
        masks["shrink_axis_mask"][i] = 1
        begin.append(int(rng.integers(-size, size)))
        end.append(junk()), strides.append(junk())
        masks["begin_mask"][i] = int(rng.random() < 0.15)
        masks["end_mask"][i] = int(rng.random() < 0.3)
      else:
        begin.append(int(rng.integers(-size - 3, size + 4)))
        end.append(int(rng.integers(-size - 3, size + 4)))
        strides.append(int(rng.choice([-3, -2, -1, -1, 1, 1, 2, 3])))
        masks["begin_mask"][i] = int(rng.random() < 0.3)
        masks["end_mask"][i] = int(rng.random() < 0.3)
  return Spec(
    shape,
    tuple(begin),
    tuple(end),
    tuple(strides),
    **{name: tuple(bits) for name, bits in masks.items()},
  )
