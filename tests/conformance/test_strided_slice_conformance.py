"""StridedSlice-1 against the OpenVINO runtime (opset1.strided_slice).

Oracles, chosen per case (docs/semantics.md#ss-6, #ss-10 and #rt-1 to #rt-5;
measured with openvino 2026.4 on a few thousand random specs):

* the CPU plugin (`oracles.openvino_cpu`) by default;
* OpenVINO's reference evaluator (`oracles.openvino_reference`,
  `Node.evaluate`) where the CPU plugin is known wrong: specs with both a
  new_axis and a shrink entry (the plugin returns garbage when trailing dims
  are implicit), and a begin_mask bit on a shrunk dim (the plugin takes
  element 0, jaxops and the reference evaluator take begin -- SS-10);
* a new_axis or shrink bit at the ellipsis position (the ellipsis wins) makes
  both runtimes corrupt their heap and abort the process, so the values come
  from the runtime run on the equivalent spec with those bits cleared, and
  the output shape from OpenVINO's shape inference on the original spec.

The reference evaluator is itself wrong on an empty dim sliced with a negative
stride (it returns size 1); every such case has empty output, so where it is
the oracle and data is empty, the shape is compared with OpenVINO's shape
inference instead. The masks are always passed with length M (the Python API
requires equal lengths).
"""

from __future__ import annotations

import collections
import dataclasses
import functools

import numpy as np
import pytest

import jaxops
from tests.support import oracles
from tests.support.asserts import assert_same
from tests.support.strided_slice import (
  MASK_NAMES,
  SPEC_EXAMPLES,
  Spec,
  random_spec,
)

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

N_RANDOM = 300
DTYPES = (np.float32, np.float32, np.int32, np.uint8)


def _masks(spec: Spec) -> tuple[tuple[int, ...], ...]:
  padded = spec.padded_masks()
  return tuple(padded[name] for name in MASK_NAMES)


def _const_node(begin, end, strides, masks, data):
  import openvino.opset1 as ov1

  return ov1.strided_slice(
    data,
    ov1.constant(np.array(begin, np.int64)),
    ov1.constant(np.array(end, np.int64)),
    ov1.constant(np.array(strides, np.int64)),
    *map(list, masks),
  )


def _param_node(masks, data, begin, end, strides):
  import openvino.opset1 as ov1

  return ov1.strided_slice(data, begin, end, strides, *map(list, masks))


def _make_const_node(spec: Spec):
  return functools.partial(
    _const_node, spec.begin, spec.end, spec.full_strides(), _masks(spec)
  )


def openvino_shape(spec: Spec, dtype=np.float32) -> tuple[int, ...]:
  """OpenVINO's shape inference for the spec (no data needed)."""
  import openvino.opset1 as ov1

  node = _make_const_node(spec)(ov1.parameter(list(spec.data_shape), dtype))
  return tuple(node.get_output_partial_shape(0).to_shape())


def _cpu(spec: Spec, x: np.ndarray) -> np.ndarray:
  return oracles.openvino_cpu(_make_const_node(spec), [x])


def _reference(spec: Spec, x: np.ndarray) -> np.ndarray:
  inputs = [x] + [
    np.array(v, np.int64) for v in (spec.begin, spec.end, spec.full_strides())
  ]
  return oracles.openvino_reference(
    functools.partial(_param_node, _masks(spec)),
    inputs,
    openvino_shape(spec, x.dtype),
    x.dtype,
  )


def _effective_kinds(spec: Spec) -> list[str]:
  masks = spec.padded_masks()
  kinds = []
  for i in range(len(spec.begin)):
    if masks["ellipsis_mask"][i]:
      kinds.append("ellipsis")
    elif masks["new_axis_mask"][i]:
      kinds.append("new_axis")
    elif masks["shrink_axis_mask"][i]:
      kinds.append("shrink")
    else:
      kinds.append("slice")
  return kinds


def _without_ellipsis_collisions(spec: Spec) -> Spec:
  ellipsis = spec.padded_masks()["ellipsis_mask"]
  cleared = {
    name: tuple(
      bit and not e for bit, e in zip(spec.padded_masks()[name], ellipsis)
    )
    for name in ("new_axis_mask", "shrink_axis_mask")
  }
  return dataclasses.replace(spec, **cleared)


def route(spec: Spec) -> str:
  """Which oracle a spec goes to (see the module docstring)."""
  masks = spec.padded_masks()
  if any(
    e and (n or s)
    for e, n, s in zip(
      masks["ellipsis_mask"], masks["new_axis_mask"], masks["shrink_axis_mask"]
    )
  ):
    return "ellipsis_collision"
  kinds = _effective_kinds(spec)
  if "new_axis" in kinds and "shrink" in kinds:
    return "reference"
  if any(
    kind == "shrink" and bit for kind, bit in zip(kinds, masks["begin_mask"])
  ):
    return "reference"
  return "cpu"


def _data(shape, dtype) -> np.ndarray:
  values = np.arange(1, int(np.prod(shape)) + 1)
  return values.astype(dtype).reshape(shape)


def expected_output(spec: Spec, x: np.ndarray) -> tuple[str, np.ndarray]:
  """(oracle name, the runtime's output) for one spec, routed as above."""
  how = route(spec)
  if how == "ellipsis_collision":
    runtime_spec = _without_ellipsis_collisions(spec)
    inner, out = expected_output(runtime_spec, x)
    assert openvino_shape(spec) == out.shape, (spec, out.shape)
    return (
      inner if inner == "shape_inference" else f"{inner}+shape_inference"
    ), out
  if how == "reference":
    if x.size == 0:
      return "shape_inference", np.zeros(openvino_shape(spec), x.dtype)
    return "reference", _reference(spec, x)
  return "cpu", _cpu(spec, x)


def _check(spec: Spec, x: np.ndarray) -> None:
  oracle, want = expected_output(spec, x)
  got = np.asarray(
    jaxops.strided_slice(x, spec.begin, spec.end, **spec.kwargs())
  )
  assert_same(got, want, f"{oracle}: {spec}")
  assert jaxops.shapes.strided_slice(
    spec.data_shape, spec.begin, spec.end, **spec.kwargs()
  ) == openvino_shape(spec)


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: e.name)
def test_spec_example_matches_openvino(example):
  # The runtime's shape is what the example records (errata applied).
  assert openvino_shape(example.spec) == example.out_shape
  if example.numpy_index is None:  # 10-/12-D: too big to materialize
    assert (
      jaxops.shapes.strided_slice(
        example.spec.data_shape,
        example.spec.begin,
        example.spec.end,
        **example.spec.kwargs(),
      )
      == example.out_shape
    )
    return
  _check(example.spec, _data(example.spec.data_shape, np.float32))


@pytest.mark.exhaustive(default=10)
@pytest.mark.parametrize("seed", range(N_RANDOM))
@pytest.mark.covering_modes
def test_random_spec_matches_openvino(seed):
  rng = np.random.default_rng(seed)
  spec = random_spec(rng)
  _check(spec, _data(spec.data_shape, DTYPES[seed % len(DTYPES)]))


def test_random_specs_cover_every_oracle_route():
  """The random specs are not all easy ones: each routing reason occurs."""
  routes = collections.Counter()
  for seed in range(N_RANDOM):
    spec = random_spec(np.random.default_rng(seed))
    routes[route(spec)] += 1
    kinds = _effective_kinds(spec)
    routes["has_ellipsis"] += "ellipsis" in kinds
    routes["negative_stride"] += any(
      kind == "slice" and k < 0 for kind, k in zip(kinds, spec.strides)
    )
    routes["empty_data"] += 0 in spec.data_shape
  assert routes["cpu"] >= 150
  assert routes["reference"] >= 30
  assert routes["ellipsis_collision"] >= 15
  assert routes["has_ellipsis"] >= 80
  assert routes["negative_stride"] >= 100
  assert routes["empty_data"] >= 10


def test_cpu_plugin_takes_element_0_for_begin_mask_on_shrunk_dim():
  """Why erratum 10 routes to the reference evaluator: the two OpenVINO
  implementations disagree, and jaxops sides with the reference (and TF)."""
  spec = Spec(
    (4, 4), (-1,), (2,), (-1,), begin_mask=(1,), shrink_axis_mask=(1,)
  )
  x = _data(spec.data_shape, np.float32)
  assert_same(_cpu(spec, x), x[0])
  assert_same(_reference(spec, x), x[-1])
  assert_same(
    jaxops.strided_slice(x, spec.begin, spec.end, **spec.kwargs()), x[-1]
  )
