"""Differential tests of `jaxops.slice` (Slice-8) against OpenVINO's CPU
plugin (`opset8.slice`, attributes as Constants), onnxruntime (Slice-13) and
the ONNX package's own Slice node cases.

Random specs are seeded (`sl.random_spec`: ranks 1-5, zero-size dims, any
subset of axes in any order, negative axes, default axes, starts and stops
in and out of range and at the int64 limits, steps of either sign and at the
int64 limits), and a table adds the int32 and int64 extremes one by one.
Every case is also checked against the NumPy reference `sl.np_slice` (the
ONNX clamp: docs/semantics.md#slice).

Oracles, per case (docs/semantics.md#runtime-bugs), each exclusion asserted
as the difference it is below:

* OpenVINO's CPU plugin, except where a step is at or below INT32_MIN
  (-2**31): its process dies of SIGFPE there whenever the slice is not
  empty (`test_openvino_dies_on_steps_at_or_below_int32_min`);
* onnxruntime, except where a stop is INT32_MAX or INT64_MAX with a negative
  step: it reads that as "to the beginning" (numpy's `None`) where the clamp
  keeps nothing, so for those cases its output is checked to be the slice
  with that stop replaced by INT64_MIN
  (`test_onnxruntime_reads_int_max_stop_as_none`).

The plugin also truncates start, stop and step to int32 when they are
Parameters rather than Constants (2**63 - 1 becomes -1); jaxops' attributes
are static, and so are the Constants here and in exported models
(`test_openvino_truncates_parameter_attributes`).
"""

from __future__ import annotations

import collections
import functools
import math
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxops
from tests.support import generators as gen
from tests.support import oracles, processes
from tests.support import slicing as sl
from tests.support.asserts import assert_same

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

NUM_CASES = 320
CHUNK = 40
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = sl.INT64_MIN, sl.INT64_MAX


def _const(values):
  import openvino as ov

  # opset8.constant refuses empty arrays (a spec that slices no axis).
  values = np.array(values, np.int64).reshape(-1)
  return ov.op.Constant(ov.Type.i64, ov.Shape([values.size]), values.tolist())


def _openvino_slice(start, stop, step, axes, data):
  import openvino.opset8 as ov_opset8

  ends = [_const(start), _const(stop), _const(step)]
  if axes is not None:
    ends.append(_const(axes))
  return ov_opset8.slice(data, *ends)


def _make_node(spec: sl.SliceSpec):
  return functools.partial(
    _openvino_slice, spec.start, spec.stop, spec.step, spec.axes
  )


def _onnxruntime(spec: sl.SliceSpec, data: np.ndarray) -> np.ndarray:
  axes = range(len(spec.start)) if spec.axes is None else spec.axes
  inputs = [data] + [
    np.array(v, np.int64).reshape(-1) for v in (spec.start, spec.stop, axes)
  ]
  inputs.append(np.array(spec.step, np.int64).reshape(-1))
  return oracles.onnxruntime("Slice", inputs, opset=13)


def openvino_dies(spec: sl.SliceSpec) -> bool:
  return any(k <= INT32_MIN for k in spec.step)


def onnxruntime_reading(spec: sl.SliceSpec) -> sl.SliceSpec | None:
  """The spec onnxruntime computes where it differs: INT32_MAX or INT64_MAX
  stops with negative steps as "before element 0"; None if it does not."""
  if not any(
    k < 0 and e in (INT32_MAX, INT64_MAX) for e, k in zip(spec.stop, spec.step)
  ):
    return None
  stop = tuple(
    INT64_MIN if k < 0 and e in (INT32_MAX, INT64_MAX) else e
    for e, k in zip(spec.stop, spec.step)
  )
  return sl.SliceSpec(spec.data_shape, spec.start, stop, spec.step, spec.axes)


def _data(seed: int, spec: sl.SliceSpec) -> np.ndarray:
  dtype = gen.ORACLE_DTYPES[seed % len(gen.ORACLE_DTYPES)]
  return gen.random_values(np.random.default_rng(seed), spec.data_shape, dtype)


def _extreme_specs() -> list[sl.SliceSpec]:
  """Every int32/int64 limit as start, stop and step on a dim of 10, and
  the issue's 3-element case."""
  limits = (INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, -11, 0, 9, 10)
  specs = [
    sl.SliceSpec((10,), (b,), (e,), (k,), (0,))
    for b in limits
    for e in limits
    for k in (1, -1, 3, -3, INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN)
  ]
  return [sl.SliceSpec((3,), (-5,), (-5,), (-1,), None), *specs]


EXTREME_SPECS = _extreme_specs()


def _cases(chunk: int) -> list[tuple[sl.SliceSpec, np.ndarray]]:
  cases = []
  for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
    spec = sl.random_spec(np.random.default_rng(seed))
    cases.append((spec, _data(seed, spec)))
  return cases


def _extreme_chunk(chunk: int) -> list[tuple[sl.SliceSpec, np.ndarray]]:
  specs = EXTREME_SPECS[chunk * 128 : (chunk + 1) * 128]
  return [
    (spec, np.arange(math.prod(spec.data_shape), dtype=np.float32))
    for spec in specs
  ]


CHUNKS = [("random", c) for c in range(NUM_CASES // CHUNK)] + [
  ("extremes", c) for c in range(math.ceil(len(EXTREME_SPECS) / 128))
]


def _chunk_cases(kind: str, chunk: int):
  return _cases(chunk) if kind == "random" else _extreme_chunk(chunk)


@functools.cache
def _runtime_outputs(kind: str, chunk: int):
  """Both runtimes on the chunk's cases (the plugin's as one model, where
  it survives): shared by the x32 and x64 runs."""
  cases = _chunk_cases(kind, chunk)
  kept = [j for j, (spec, _) in enumerate(cases) if not openvino_dies(spec)]
  openvino = dict(
    zip(
      kept,
      oracles.openvino_cpu_many(
        [_make_node(cases[j][0]) for j in kept],
        [(cases[j][1],) for j in kept],
      ),
    )
  )
  onnxruntime = [_onnxruntime(spec, x) for spec, x in cases]
  return openvino, onnxruntime


@pytest.mark.exhaustive(default=2)
@pytest.mark.parametrize("kind, chunk", CHUNKS, ids=lambda v: str(v))
@pytest.mark.covering_modes
def test_cases_match_runtimes(kind, chunk):
  cases = _chunk_cases(kind, chunk)
  run_all = jax.jit(
    lambda xs: [
      jaxops.slice(x, s.start, s.stop, s.step, s.axes)
      for x, (s, _) in zip(xs, cases)
    ]
  )
  outputs = run_all([x for _, x in cases])
  openvino, onnxruntime = _runtime_outputs(kind, chunk)
  for j, ((spec, x), out) in enumerate(zip(cases, outputs)):
    context = spec.describe()
    assert_same(out, sl.np_slice(x, *_args(spec)), "numpy " + context)
    if j in openvino:
      assert_same(out, openvino[j], "openvino_cpu " + context)
    reading = onnxruntime_reading(spec)
    if reading is None:
      assert_same(out, onnxruntime[j], "onnxruntime " + context)
    else:
      # Runtime against NumPy: both keep 64-bit dtypes in x32 too.
      want = sl.np_slice(x, *_args(reading))
      assert onnxruntime[j].dtype == want.dtype, context
      np.testing.assert_array_equal(
        onnxruntime[j], want, "onnxruntime's INT_MAX reading " + context
      )


def _args(spec: sl.SliceSpec):
  return spec.start, spec.stop, spec.step, spec.axes


def test_cases_cover_every_route():
  counts = collections.Counter()
  for kind, chunk in CHUNKS:
    for spec, x in _chunk_cases(kind, chunk):
      counts["openvino_dies"] += openvino_dies(spec)
      reading = onnxruntime_reading(spec)
      counts["onnxruntime_int_max"] += reading is not None
      counts["differs_for_onnxruntime"] += reading is not None and (
        sl.np_slice(x, *_args(reading)).shape
        != sl.np_slice(x, *_args(spec)).shape
      )
      counts["negative_step"] += any(k < 0 for k in spec.step)
      counts["empty"] += 0 in sl.np_slice(x, *_args(spec)).shape
      counts["zero_size_data"] += 0 in spec.data_shape
      counts["default_axes"] += spec.axes is None
      counts[f"rank_{len(spec.data_shape)}"] += 1
  assert counts["openvino_dies"] >= 100, counts
  assert counts["onnxruntime_int_max"] >= 40, counts
  assert counts["differs_for_onnxruntime"] >= 20, counts
  assert counts["negative_step"] >= 200, counts
  assert counts["empty"] >= 100, counts
  assert counts["zero_size_data"] >= 10, counts
  assert counts["default_axes"] >= 30, counts
  for r in range(1, 6):
    assert counts[f"rank_{r}"] >= 30, counts


# The spec's examples (data arange(10) unless given): name -> (shape, start,
# stop, step, axes, printed output or None for "shape only", output shape).
SPEC_EXAMPLES = {
  "1_basic": ((10,), [1], [8], [1], [0], list(range(1, 8)), (7,)),
  "2_default_axes": ((10,), [1], [8], [1], None, list(range(1, 8)), (7,)),
  "3_step_2": ((10,), [1], [8], [2], [0], [1, 3, 5, 7], (4,)),
  "4_out_of_range": ((10,), [-100], [100], [1], [0], list(range(10)), (10,)),
  "5_backward_stop_-11": (
    (10,),
    [9],
    [-11],
    [-1],
    [0],
    list(range(9, -1, -1)),
    (10,),
  ),
  "6_backward_stop_0": (
    (10,),
    [9],
    [0],
    [-1],
    [0],
    list(range(9, 0, -1)),
    (9,),
  ),
  "7_backward_stop_-10": (
    (10,),
    [9],
    [-10],
    [-1],
    [0],
    list(range(9, 0, -1)),
    (9,),
  ),
  "8_backward_step_-2": ((10,), [9], [-11], [-2], [0], [9, 7, 5, 3, 1], (5,)),
  "9_backward_out_of_range": (
    (10,),
    [100],
    [-100],
    [-1],
    [0],
    list(range(9, -1, -1)),
    (10,),
  ),
  "10_2d_all_axes": (
    (2, 5),
    [0, 1],
    [2, 4],
    [1, 2],
    [0, 1],
    [[1, 3], [6, 8]],
    (2, 2),
  ),
  "11_3d_all_axes": (
    (20, 10, 5),
    [0, 0, 0],
    [4, 10, 5],
    [1, 1, 1],
    [0, 1, 2],
    None,
    (4, 10, 5),
  ),
  "12_3d_last_axes_default": (
    (20, 10, 5),
    [0, 0],
    [4, 10],
    [1, 1],
    [0, 1],
    None,
    (4, 10, 5),
  ),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
def test_spec_example(name):
  shape, start, stop, step, axes, printed, out_shape = SPEC_EXAMPLES[name]
  x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
  out = jaxops.slice(x, start, stop, step, axes)
  assert out.shape == out_shape
  if printed is not None:
    assert_same(out, np.array(printed, np.float32), name)
  node = functools.partial(_openvino_slice, start, stop, step, axes)
  assert_same(out, oracles.openvino_cpu(node, [x]), name)
  spec = sl.SliceSpec(shape, tuple(start), tuple(stop), tuple(step), axes)
  assert_same(out, _onnxruntime(spec, x), name)


def test_runtimes_clamp_unlike_python():
  """Erratum (docs/semantics.md#slice): the spec says "python slicing", but
  both runtimes clamp a negative step's start that is still negative after
  adding the size to 0: on 3 elements start=-5, stop=-5, step=-1 keeps x[0]
  where Python keeps nothing."""
  x = np.array([7, 8, 9], np.float32)
  spec = sl.SliceSpec((3,), (-5,), (-5,), (-1,), (0,))
  want = np.array([7], np.float32)
  assert_same(jaxops.slice(x, [-5], [-5], [-1]), want)
  assert_same(oracles.openvino_cpu(_make_node(spec), [x]), want)
  assert_same(_onnxruntime(spec, x), want)
  assert x[-5:-5:-1].shape == (0,)


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_every_data_dtype(dtype):
  """Every dtype JAX has against the reference; against both runtimes where
  they take it."""
  x = gen.random_values(np.random.default_rng(2), (4, 5, 3), dtype)
  spec = sl.SliceSpec((4, 5, 3), (-1, 1), (INT64_MIN, 100), (-2, 3), (0, -2))
  out = jaxops.slice(x, *_args(spec))
  assert_same(out, sl.np_slice(x, *_args(spec)), gen.dtype_id(dtype))
  if np.dtype(dtype) in map(np.dtype, gen.ORACLE_DTYPES):
    assert_same(out, oracles.openvino_cpu(_make_node(spec), [x]))
    assert_same(out, _onnxruntime(spec, x))


NODE_CASES = oracles.onnx_node_cases("Slice")


def test_node_cases_found():
  # slice, slice_neg, slice_neg_steps, slice_negative_axes, slice_default_axes,
  # slice_default_steps, slice_start_out_of_bounds, slice_end_out_of_bounds
  assert len(NODE_CASES) >= 8, [c[0] for c in NODE_CASES]


@pytest.mark.parametrize("case", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_onnx_node_case(case):
  name, inputs, expected, attrs = case
  assert not attrs, attrs  # Slice-10 and later: everything is an input
  data, starts, ends = inputs[:3]
  axes = inputs[3].tolist() if len(inputs) > 3 else None
  steps = inputs[4].tolist() if len(inputs) > 4 else [1] * len(starts)
  out = jaxops.slice(data, starts.tolist(), ends.tolist(), steps, axes)
  assert_same(out, expected, name)


# Documented runtime bugs: each asserted as the difference it is. ------------

_SIGFPE_SCRIPT = """
import sys
import numpy as np, openvino as ov, openvino.opset8 as o8
step = int(sys.argv[1])
data = o8.parameter([10], np.float32)
c = lambda v: o8.constant(np.array([v], np.int64))
node = o8.slice(data, c(9), c(-2**63), c(step), c(0))
compiled = ov.Core().compile_model(ov.Model([node], [data]), "CPU")
print(compiled([np.arange(10, dtype=np.float32)])[0])
"""


@pytest.mark.jax_modes(None)
@pytest.mark.parametrize("step", [INT64_MIN, INT32_MIN, INT32_MIN + 1])
def test_openvino_dies_on_steps_at_or_below_int32_min(step):
  """RT-10, wider than -2**63: a step at or below -2**31 kills the
  CPU plugin's process with SIGFPE when the slice is not empty; -2**31 + 1
  works. onnxruntime and jaxops give [9] (one element: the start, clamped).
  Run in a subprocess."""
  result = subprocess.run(
    [sys.executable, "-c", _SIGFPE_SCRIPT, str(step)],
    capture_output=True,
    text=True,
    env=processes.subprocess_env(),
    timeout=120,
  )
  x = np.arange(10, dtype=np.float32)
  spec = sl.SliceSpec((10,), (9,), (INT64_MIN,), (step,), (0,))
  assert_same(jaxops.slice(x, [9], [INT64_MIN], [step], [0]), x[9:10])
  assert_same(_onnxruntime(spec, x), x[9:10])
  if step <= INT32_MIN:
    assert result.returncode == -signal.SIGFPE, result
  else:
    assert result.returncode == 0 and "[9.]" in result.stdout, result


@pytest.mark.parametrize("stop", [INT32_MAX, INT64_MAX])
def test_onnxruntime_reads_int_max_stop_as_none(stop):
  """RT: onnxruntime treats a stop of INT32_MAX or INT64_MAX as "past the
  end" for either sign of step, so a negative step walks to the beginning;
  by the ONNX clamp (and in OpenVINO and jaxops) the stop clamps to size - 1
  and nothing is kept."""
  x = np.arange(10, dtype=np.float32)
  spec = sl.SliceSpec((10,), (9,), (stop,), (-1,), (0,))
  assert_same(_onnxruntime(spec, x), x[::-1])
  want = np.zeros(0, np.float32)
  assert_same(oracles.openvino_cpu(_make_node(spec), [x]), want)
  assert_same(jaxops.slice(x, [9], [stop], [-1]), want)
  # One below is an ordinary value for all three.
  spec = sl.SliceSpec((10,), (9,), (stop - 1,), (-1,), (0,))
  assert_same(_onnxruntime(spec, x), want)


def _openvino_parameter_slice(data, start, stop, step, axes):
  import openvino.opset8 as ov_opset8

  return ov_opset8.slice(data, start, stop, step, axes)


def test_openvino_truncates_parameter_attributes():
  """RT: given as Parameters (run-time values), the plugin truncates start,
  stop and step to int32: a stop of 2**63 - 1 acts as -1 and a step of
  2**63 - 1 as -1. As Constants (what this suite and exported models use)
  they are exact."""
  x = np.arange(10, dtype=np.float32)
  for stop, step, truncated in [
    (INT64_MAX, 1, x[:9]),
    (10, INT64_MAX, x[:0]),
  ]:
    attrs = [np.array([v], np.int64) for v in (0, stop, step, 0)]
    got = oracles.openvino_cpu(_openvino_parameter_slice, [x, *attrs])
    assert_same(got, truncated)
    want = sl.np_slice(x, [0], [stop], [step], [0])
    spec = sl.SliceSpec((10,), (0,), (stop,), (step,), (0,))
    assert_same(oracles.openvino_cpu(_make_node(spec), [x]), want)
    assert_same(jaxops.slice(x, [0], [stop], [step], [0]), want)
