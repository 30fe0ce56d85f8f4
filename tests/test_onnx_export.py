"""`jaxops.onnx.to_onnx`: node census, round trips through both runtimes.

* Census: each operator call exports as exactly one node of its own kind
  (plus index casts; StridedSlice: one Slice plus at most one
  Squeeze/Unsqueeze/Reshape), checked as exact op_type counts of the model.
* Round trips, bit-exact: jaxops -> ONNX -> onnxruntime's CPU provider, and
  -> OpenVINO (`openvino.convert_model` of the ONNX model, compiled on CPU),
  over the conformance case generators of all four operators (GatherND and
  GatherElements random cases, the ScatterNDUpdate signatures with unique and
  duplicate tuples, the StridedSlice spec examples and random specs). The
  cases of one chunk are one exported function with one call per case, so a
  chunk costs one export, one session and one compile; its runtime outputs
  are cached and shared by the x32 and x64 runs, which differ only in how
  jaxops computes the expected values (`to_onnx` traces with 64-bit types off
  unless asked, so the model's inputs are 32-bit either way and jaxops runs
  on those same inputs).
* vmap of each operator, a model with several calls and ordinary layers,
  `mode="clip"`, 64-bit export, and the error when the extra is missing.

Runtime errata do not apply to the exported graphs: OpenVINO gets Slice
instead of its StridedSlice (no ellipsis crashes), no GatherND or ScatterND
with empty index tuples (they export as the normal computation), and 32-bit
values (its CPU plugin computes int64 as int32 and float64 as float32).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import math
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxops
from tests.conformance import test_scatter_nd_update_conformance as scatter
from tests.support import gather as gs
from tests.support import generators as gen
from tests.support import processes
from tests.support import scatter_reduce as sr
from tests.support import slicing as sl
from tests.support import strided_slice as ss
from tests.support.asserts import assert_same

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
# One worker runs this file: jax2onnx's first export in a process imports
# its plugins and compiles their examples' initializers (about 10 s).
pytestmark = [pytest.mark.covering_modes, pytest.mark.xdist_group("jax2onnx")]

requires_extra = pytest.mark.skipif(
  sys.version_info < (3, 11),
  reason="the 'onnx' extra cannot be installed here: jax2onnx needs "
  "Python >= 3.11",
)

CHUNK = 40
_OV_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


# Exporting and running -------------------------------------------------------


def _onnx():
  import jaxops.onnx

  return jaxops.onnx


def census(model) -> dict[str, int]:
  """{op_type: count} of the model's nodes."""
  return dict(collections.Counter(node.op_type for node in model.graph.node))


def output_census(model) -> list[dict[str, int]]:
  """The census of the nodes each output depends on, per output.

  For a model made of independent calls (one output each, no shared
  inputs) this is the census of each call.
  """
  producers = {name: node for node in model.graph.node for name in node.output}
  censuses = []
  for output in model.graph.output:
    seen, stack = set(), [output.name]
    counts = collections.Counter()
    while stack:
      node = producers.get(stack.pop())
      if node is None or id(node) in seen:
        continue
      seen.add(id(node))
      counts[node.op_type] += 1
      stack.extend(node.input)
    censuses.append(dict(counts))
  return censuses


@dataclasses.dataclass
class Exported:
  """A model, the inputs it takes, and what both runtimes return for them."""

  model: Any
  inputs: list[np.ndarray]  # the example leaves, as the model's input dtypes
  # Both runtimes apply ScatterND duplicates in order only on one thread
  # (docs/export.md); 2 otherwise.
  threads: int = 2

  def input_dtypes(self) -> list[np.dtype]:
    from onnx import helper

    return [
      helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
      for v in self.model.graph.input
    ]

  @functools.cached_property
  def onnxruntime(self) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = self.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
      self.model.SerializeToString(),
      options,
      providers=["CPUExecutionProvider"],
    )
    names = [v.name for v in session.get_inputs()]
    return session.run(None, dict(zip(names, self.inputs)))

  def run_both(self) -> None:
    """Runs the model in both runtimes now (results are cached)."""
    for name in ("onnxruntime", "openvino"):
      getattr(self, name)

  @functools.cached_property
  def openvino(self) -> list[np.ndarray]:
    compiled = openvino_compile(self.model, threads=self.threads)
    # By name: OpenVINO drops inputs nothing reads.
    feeds = dict(zip((v.name for v in self.model.graph.input), self.inputs))
    results = compiled(
      [
        next(feeds[name] for name in port.get_names() if name in feeds)
        for port in compiled.inputs
      ]
    )
    return [
      np.asarray(results[compiled.output(j)])
      for j in range(len(compiled.outputs))
    ]


def openvino_compile(model, convert=None, threads=2):
  """The ONNX model through OpenVINO's ONNX frontend, compiled on CPU.

  `convert` defaults to `Core.read_model`, which runs the same frontend as
  `openvino.convert_model` without its telemetry (a forked process per call);
  `test_openvino_convert_model_is_read_model` checks they agree.
  """
  import openvino as ov

  core = ov.Core()
  with tempfile.TemporaryDirectory() as folder:
    path = pathlib.Path(folder) / "model.onnx"
    path.write_bytes(model.SerializeToString())
    ov_model = (convert or core.read_model)(str(path))
  return core.compile_model(
    ov_model, "CPU", {**_OV_CONFIG, "INFERENCE_NUM_THREADS": threads}
  )


def export(fn, *example_args, **options) -> Exported:
  """Exports `fn` and casts the example leaves to the model's input dtypes."""
  model = _onnx().to_onnx(fn, *example_args, **options)
  exported = Exported(model, [])
  leaves = jax.tree.leaves(example_args)
  # Only inputs the model kept: an unused argument may be pruned.
  names = [v.name for v in model.graph.input]
  assert all(name.startswith("in_") for name in names), names
  exported.inputs = [
    np.asarray(leaves[int(name[3:])]).astype(dtype)
    for name, dtype in zip(names, exported.input_dtypes())
  ]
  return exported


def model_inputs(exported: Exported, example_args) -> Any:
  """`example_args` with every leaf cast to the dtype the model gives it."""
  leaves, tree = jax.tree.flatten(example_args)
  dtypes = dict(
    zip(
      (int(v.name[3:]) for v in exported.model.graph.input),
      exported.input_dtypes(),
    )
  )
  return jax.tree.unflatten(
    tree,
    [
      np.asarray(leaf).astype(dtypes.get(j, np.asarray(leaf).dtype))
      for j, leaf in enumerate(leaves)
    ],
  )


def check_round_trip(
  exported: Exported, expected, context, openvino_rtol=lambda j: 0.0
) -> None:
  """Both runtimes' outputs equal `expected` (one array per output) exactly,
  or for OpenVINO within `openvino_rtol(j)` of output j where that is
  nonzero."""
  expected = [np.asarray(e) for e in expected]
  for name in ("onnxruntime", "openvino"):
    outputs = getattr(exported, name)
    assert len(outputs) == len(expected), name
    for j, (got, want) in enumerate(zip(outputs, expected)):
      rtol = openvino_rtol(j) if name == "openvino" else 0.0
      if rtol:
        assert got.dtype == want.dtype, f"{name}: {context(j)}"
        np.testing.assert_allclose(
          got, want, rtol=rtol, err_msg=f"{name}: {context(j)}"
        )
      else:
        assert_same(got, want, f"{name}: {context(j)}")


# Round trips over the conformance cases --------------------------------------


@dataclasses.dataclass(frozen=True)
class RoundTrip:
  """One case of a round-trip table: a jaxops call with its attributes bound,
  its inputs, and the nodes it must export as (an exact census, or a
  predicate of it)."""

  call: Callable[..., Any]
  inputs: tuple[np.ndarray, ...]
  name: str  # for failure messages
  census: dict[str, int] | Callable[[dict[str, int]], bool]
  # ScatterND duplicates and the reductions: both runtimes apply repeated
  # targets in index order only on one thread.
  serial: bool = False
  openvino_rtol: float = 0.0


def _chunks(n_cases: int) -> list[range]:
  return [
    range(start, min(start + CHUNK, n_cases))
    for start in range(0, n_cases, CHUNK)
  ]


def over_chunks(n_cases: int, prefix: str = "cases"):
  """Parametrizes `chunk` over the chunks of a table of `n_cases` cases."""
  return pytest.mark.parametrize(
    "chunk",
    _chunks(n_cases),
    ids=lambda r: f"{prefix}_{r.start}_{r.stop - 1}",
  )


@functools.cache
def _exported_chunk(make: Callable[[int], RoundTrip], chunk: range):
  """The cases `make(j)` of the chunk as one exported function, one call a
  case, run in both runtimes once."""
  trips = [make(j) for j in chunk]

  def fn(arrays):
    return [trip.call(*inputs) for trip, inputs in zip(trips, arrays)]

  args = [trip.inputs for trip in trips]
  exported = export(fn, args)
  exported.threads = 1 if any(trip.serial for trip in trips) else 2
  exported.run_both()
  return trips, fn, args, exported


def check_round_trips(make: Callable[[int], RoundTrip], chunk: range) -> None:
  """Both runtimes equal jaxops on the model's inputs, and each call exports
  as its census says."""
  trips, fn, args, exported = _exported_chunk(make, chunk)
  expected = jax.jit(fn)(model_inputs(exported, args))
  check_round_trip(
    exported,
    expected,
    lambda j: trips[j].name,
    openvino_rtol=lambda j: trips[j].openvino_rtol,
  )
  for trip, counts in zip(trips, output_census(exported.model)):
    want = trip.census
    exact = isinstance(want, dict)
    assert (counts == want) if exact else want(counts), (trip.name, counts)


GATHER_SEEDS = range(120)


# Indices are int32 in the models (traced with 64-bit types off), so the
# Casts counted are GatherND's and ScatterND's casts to int64.
def _gather_nd_trip(seed: int) -> RoundTrip:
  # Empty tuples (k == 0) in one seed in 8, as in the conformance tests.
  case = gs.random_gather_nd_case(
    seed, dtypes=gen.ORACLE_DTYPES, min_k=0 if seed % 8 == 0 else 1
  )
  return RoundTrip(
    lambda d, i: jaxops.gather_nd(d, i, case.batch_dims),
    (case.data, case.indices),
    case.describe(),
    {"Cast": 1, "GatherND": 1}
    if case.indices.shape[-1]
    else lambda counts: "GatherND" not in counts,  # k = 0: a broadcast
  )


def _gather_elements_trip(seed: int) -> RoundTrip:
  case = gs.random_gather_elements_case(seed, dtypes=gen.ORACLE_DTYPES)
  smaller = any(
    n_idx < n_data
    for d, (n_data, n_idx) in enumerate(
      zip(case.data.shape, case.indices.shape)
    )
    if d != case.axis % case.data.ndim
  )
  return RoundTrip(
    lambda d, i: jaxops.gather_elements(d, i, case.axis),
    (case.data, case.indices),
    case.describe(),
    {"GatherElements": 1} | ({"Slice": 1} if smaller else {}),
  )


_GATHER_TRIPS = {
  "gather_nd": _gather_nd_trip,
  "gather_elements": _gather_elements_trip,
}


@pytest.mark.exhaustive(
  default=3, keep=("gather_elements-seeds_40_79", "gather_nd-seeds_80_119")
)
@requires_extra
@over_chunks(len(GATHER_SEEDS), "seeds")
@pytest.mark.parametrize("op", ["gather_nd", "gather_elements"])
def test_gather_round_trips(op, chunk):
  check_round_trips(_GATHER_TRIPS[op], chunk)


def _scatter_cases():
  """(signature, seed, unique) for every exported ScatterNDUpdate case."""
  cases = [(sig, seed, True) for sig in scatter.SIGNATURES for seed in range(6)]
  cases += [
    (sig, seed, True) for sig in scatter.K0_SIGNATURES for seed in range(5)
  ]
  cases += [
    (sig, seed, False)
    for sig in scatter.DUPLICATE_SIGNATURES
    for seed in range(5)
  ]
  return cases


SCATTER_CASES = _scatter_cases()


def _scatter_trip(j: int) -> RoundTrip:
  signature, seed, unique = SCATTER_CASES[j]
  return RoundTrip(
    jaxops.scatter_nd_update,
    scatter._case(signature, seed, unique=unique),
    f"{scatter._ids([signature])[0]} seed {seed} unique={unique}",
    {"Cast": 1, "ScatterND": 1}
    if signature[2]
    # k = 0: the last update replaces data, no ScatterND
    else lambda counts: "ScatterND" not in counts,
    serial=not unique,
  )


@requires_extra
@over_chunks(len(SCATTER_CASES))
def test_scatter_nd_update_round_trips(chunk):
  check_round_trips(_scatter_trip, chunk)


# Scatter reductions: ScatterND(reduction) and ScatterElements(axis,
# reduction), with the composites for sub, bool, mean and use_init_val=False
# (docs/export.md#scatter-reductions); one thread, where both runtimes apply
# repeated targets in index order. One dtype per lowering class (float,
# signed, narrow signed, unsigned, bool) and one seed: the runtimes' values
# are the conformance tests' matter, the graph's nodes this file's.
_REDUCE_DTYPES = (np.float32, np.int32, np.int8, np.uint8, np.bool_)
_REDUCE_SEEDS = range(1)


def _reduction_cases():
  cases = []
  for dtype in _REDUCE_DTYPES:
    for reduction in sr.ND_REDUCTIONS:
      cases += [
        ("nd", sr.random_nd_case(seed, reduction, dtype, fractional=True))
        for seed in _REDUCE_SEEDS
      ]
    for reduction in sr.ELEMENTS_REDUCTIONS:
      if dtype == np.bool_ and reduction == "mean":
        continue
      for use_init_val in (True, False)[: 1 if reduction == "none" else 2]:
        cases += [
          (
            "elements",
            sr.random_elements_case(
              seed, reduction, dtype, use_init_val=use_init_val, fractional=True
            ),
          )
          for seed in _REDUCE_SEEDS
        ]
  return cases


REDUCTION_CASES = _reduction_cases()


def _reduce_call(kind, case, data, indices, updates):
  if kind == "nd":
    return jaxops.scatter_nd_update(
      data, indices, updates, reduction=case.reduction
    )
  return jaxops.scatter_elements_update(
    data,
    indices,
    updates,
    case.axis,
    reduction=case.reduction,
    use_init_val=case.use_init_val,
  )


def _divides_floats(kind, case) -> bool:
  return (
    kind == "elements"
    and case.reduction == "mean"
    and case.data.dtype.kind == "f"
  )


def _reduction_census(kind, case) -> dict[str, int]:
  """The nodes one call exports as (its index Cast included)."""
  if kind == "nd":
    counts = {"Cast": 1, "ScatterND": 1}
    if case.reduction == "sub" and case.data.dtype == np.bool_:
      return {"Cast": 3, "ScatterND": 1, "Mod": 1, "Xor": 1}
    if case.reduction == "sub" and case.data.dtype.kind != "u":
      counts["Neg"] = 1
    elif case.reduction == "sub" and case.data.dtype.itemsize < 8:
      # (2**bits - y) mod 2**bits in int64 (OpenVINO saturates 0 - y).
      counts.update(Cast=3, Sub=1, Mod=1)
    elif case.reduction == "sub":
      counts["Sub"] = 1
    return counts
  scatters = 1 + (case.reduction != "none" and not case.use_init_val)
  if case.reduction != "mean":
    return {"ScatterElements": scatters}
  counts = {"ScatterElements": scatters + 1, "Greater": 1, "Where": 1}
  counts["Add"] = int(case.use_init_val)
  if case.data.dtype.kind == "f":
    return counts | {"Cast": 1, "Div": 1}
  # int64 sums, floor division, cast back
  return counts | {
    "Cast": 5,
    "Div": 1,
    "Max": 1,
    "Mul": 1,
    "Sub": 2,
    "Less": 1,
  }


def _reduction_trip(j: int) -> RoundTrip:
  kind, case = REDUCTION_CASES[j]
  return RoundTrip(
    functools.partial(_reduce_call, kind, case),
    case.inputs,
    f"{kind} {case.describe()}",
    {k: v for k, v in _reduction_census(kind, case).items() if v},
    serial=True,
    # The plugin multiplies by the reciprocal (RT-23): within an ulp or two
    # of the exact quotient.
    openvino_rtol=2 * float(np.finfo(case.data.dtype).eps)
    if _divides_floats(kind, case)
    else 0.0,
  )


@pytest.mark.exhaustive(default=2, keep=("cases_40_79",))
@requires_extra
@over_chunks(len(REDUCTION_CASES))
def test_scatter_reduction_round_trips(chunk):
  check_round_trips(_reduction_trip, chunk)


def _strided_slice_cases() -> list[tuple[str, ss.Spec]]:
  cases = [
    (example.name, example.spec)
    for example in ss.SPEC_EXAMPLES
    if example.numpy_index is not None
  ]
  cases += [
    (f"random_{seed}", ss.random_spec(np.random.default_rng(seed)))
    for seed in range(120)
  ]
  return cases


STRIDED_SLICE_CASES = _strided_slice_cases()
_SLICE_DTYPES = (np.float32, np.int32, np.uint8, np.float16, np.bool_)


def _slice_data(j: int, spec: ss.Spec | sl.SliceSpec) -> np.ndarray:
  values = np.arange(1, math.prod(spec.data_shape) + 1)
  dtype = _SLICE_DTYPES[j % len(_SLICE_DTYPES)]
  if dtype == np.bool_:
    values = values % 3 == 0
  return values.astype(dtype).reshape(spec.data_shape)


def _one_slice_and_one_reshape(counts: dict[str, int]) -> bool:
  """At most one Slice and one Squeeze, Unsqueeze or Reshape, nothing else."""
  reshapes = sum(
    counts.get(op, 0) for op in ("Squeeze", "Unsqueeze", "Reshape")
  )
  slices = counts.get("Slice", 0)
  return (
    slices <= 1
    and reshapes <= 1
    and sum(counts.values()) == (slices + reshapes)
  )


def _strided_slice_trip(j: int) -> RoundTrip:
  name, spec = STRIDED_SLICE_CASES[j]
  return RoundTrip(
    lambda x: jaxops.strided_slice(x, spec.begin, spec.end, **spec.kwargs()),
    (_slice_data(j, spec),),
    f"{name}: {spec}",
    _one_slice_and_one_reshape,
  )


@requires_extra
@over_chunks(len(STRIDED_SLICE_CASES))
def test_strided_slice_round_trips(chunk):
  check_round_trips(_strided_slice_trip, chunk)


# Census and round trips of specific calls ------------------------------------


def _data(shape, dtype=np.float32) -> np.ndarray:
  return np.arange(1, math.prod(shape) + 1).astype(dtype).reshape(shape)


def _round_trip(fn, *args, threads=2, **options) -> Exported:
  """Exports `fn`, checks both runtimes (on `threads` threads) against
  jaxops, returns the model."""
  exported = export(fn, *args, **options)
  exported.threads = threads
  expected = jax.jit(fn)(*model_inputs(exported, args))
  check_round_trip(exported, jax.tree.leaves(expected), lambda j: f"out {j}")
  return exported


def _attributes(model, op_type: str) -> list[dict[str, Any]]:
  from onnx import helper

  return [
    {a.name: helper.get_attribute_value(a) for a in node.attribute}
    for node in model.graph.node
    if node.op_type == op_type
  ]


@requires_extra
@pytest.mark.parametrize("index_dtype", gen.INDEX_DTYPES, ids=gen.dtype_id)
def test_index_dtypes_cast_only_where_the_node_needs_it(index_dtype):
  """GatherND and ScatterND take int64 only (onnxruntime); GatherElements
  takes int32 and int64 as they are. 64-bit indices are int32 in a model
  traced with 64-bit types off."""
  signed = np.issubdtype(index_dtype, np.signedinteger)
  x = _data((5, 4, 3))
  nd_indices = np.array(
    [[4, 0], [-5, 3] if signed else [0, 3], [2, 1]], index_dtype
  )
  element_indices = np.array(
    [[[1, 0, 1]], [[-1, -2, 0] if signed else [1, 0, 0]]], index_dtype
  )
  updates = np.full((3, 3), -1, np.float32)

  def fn(x, nd_indices, element_indices, updates):
    return (
      jaxops.gather_nd(x, nd_indices),
      jaxops.gather_elements(x[:2, :1], element_indices, axis=0),
      jaxops.scatter_nd_update(x, nd_indices, updates),
    )

  exported = _round_trip(fn, x, nd_indices, element_indices, updates)
  kept = np.dtype(index_dtype) in (np.dtype(np.int32), np.dtype(np.int64))
  counts = output_census(exported.model)
  assert counts[0] == {"Cast": 1, "GatherND": 1}
  assert counts[1] == {"Slice": 1, "GatherElements": 1} | (
    {} if kept else {"Cast": 1}
  )
  assert counts[2] == {"Cast": 1, "ScatterND": 1}


@requires_extra
@pytest.mark.jax_modes("x64")  # the expected float64 values need x64
def test_64_bit_export_keeps_int64_indices_uncast():
  x = _data((4, 3), np.float64)
  indices = np.array([[3], [-4], [1]], np.int64)
  updates = _data((3, 3), np.float64)
  exported = _round_trip(
    lambda x, i, u: (jaxops.gather_nd(x, i), jaxops.scatter_nd_update(x, i, u)),
    x,
    indices,
    updates,
    enable_double_precision=True,
  )
  assert exported.input_dtypes() == [np.float64, np.int64, np.float64]
  assert census(exported.model) == {"GatherND": 1, "ScatterND": 1}


@requires_extra
def test_clip_mode_exports_the_clamp():
  """mode="clip": Max and Min clamp the indices into [-s, s-1] (Min alone
  for unsigned indices), so the runtimes' negative wrap gives jaxops'
  clip exactly; out-of-range indices included."""
  x = _data((4, 3, 2))
  nd_indices = np.array([[9, -2], [-9, 7], [1, -3], [4, 3]], np.int32)
  unsigned = np.array([[9, 0], [255, 2], [1, 1]], np.uint8)
  element_indices = np.array([[[-7, 5]], [[3, -1]]], np.int32)
  updates = _data((4, 2))

  def fn(x, nd_indices, unsigned, element_indices, updates):
    return (
      jaxops.gather_nd(x, nd_indices, mode="clip"),
      jaxops.gather_nd(x, unsigned, mode="clip"),
      jaxops.gather_elements(x[:2, :1], element_indices, axis=2, mode="clip"),
      jaxops.scatter_nd_update(x, nd_indices, updates, mode="clip"),
    )

  exported = _round_trip(fn, x, nd_indices, unsigned, element_indices, updates)
  counts = output_census(exported.model)
  assert counts[0] == {"Cast": 1, "Max": 1, "Min": 1, "GatherND": 1}
  assert counts[1] == {"Min": 1, "Cast": 1, "GatherND": 1}
  assert counts[2] == {"Slice": 1, "Max": 1, "Min": 1, "GatherElements": 1}
  assert counts[3] == {"Cast": 1, "Max": 1, "Min": 1, "ScatterND": 1}


@requires_extra
def test_out_of_range_indices_are_the_runtimes_business():
  """Default modes: no fill or drop in the graph. onnxruntime rejects the
  index at run time; OpenVINO does for GatherElements and ScatterND (its
  GatherND reads outside data, so it is not run here). docs/export.md."""
  x = _data((4, 3))
  exported = export(
    lambda x, i, j, k, u: (
      jaxops.gather_nd(x, i),
      jaxops.gather_elements(x, j, axis=0),
      jaxops.scatter_nd_update(x, k, u),
    ),
    x,
    np.array([[4]], np.int32),
    np.array([[0, -5, 1]], np.int32),
    np.array([[1], [4]], np.int32),
    _data((2, 3)),
  )
  with pytest.raises(Exception, match="invalid ind"):
    _ = exported.onnxruntime
  for fn in (
    lambda x, j: jaxops.gather_elements(x, j, axis=0),
    lambda x, k, u: jaxops.scatter_nd_update(x, k, u),
  ):
    args = (
      (x, np.array([[0, -5, 1]], np.int32))
      if fn.__code__.co_argcount == 2
      else (x, np.array([[1], [4]], np.int32), _data((2, 3)))
    )
    with pytest.raises(Exception, match="index|ind"):
      _ = export(fn, *args).openvino


def _gnd(batch_dims=0):
  return lambda data, indices: jaxops.gather_nd(data, indices, batch_dims)


def _ge(axis):
  return lambda data, indices: jaxops.gather_elements(data, indices, axis)


def _snu(data, indices, updates):
  return jaxops.scatter_nd_update(data, indices, updates)


def _ss(data):
  # x[1:, np.newaxis, ::-2, 2]
  return jaxops.strided_slice(
    data,
    [1, 0, -1, 2],
    [0, 0, 0, 0],
    [1, 1, -2, 1],
    begin_mask=[0, 0, 1],
    end_mask=[1, 0, 1],
    new_axis_mask=[0, 1],
    shrink_axis_mask=[0, 0, 0, 1],
  )


def _indices(shape, sizes, seed=0):
  """Valid indices (negative ones included) of `shape`, for `sizes`."""
  return gen.random_indices(np.random.default_rng(seed), sizes, shape, np.int32)


_B = 3


def _vmapped_slices(name, fn, want):
  """VMAP_CASES rows of `fn` on [4, 5, 3] data, vmapped over a leading batch
  dim (census `want`) and over dim 2."""
  return {
    name: (jax.vmap(fn), (_data((_B, 4, 5, 3)),), want),
    f"{name}_axis_2": (jax.vmap(fn, in_axes=2), (_data((4, 5, _B, 3)),), None),
  }


# (name, function, arguments, exact census or None for "one operator node")
VMAP_CASES = {
  "gather_nd_both": (
    jax.vmap(_gnd()),
    (_data((_B, 3, 4)), _indices((_B, 2), (3, 4))),
    {"Cast": 1, "GatherND": 1},
  ),
  "gather_nd_both_batch_dims_1": (
    jax.vmap(_gnd(1)),
    (_data((_B, 2, 3, 4)), _indices((_B, 2, 5), (3,))),
    {"Cast": 1, "GatherND": 1},
  ),
  "gather_nd_nested": (
    jax.vmap(jax.vmap(_gnd())),
    (_data((_B, 2, 3, 4)), _indices((_B, 2, 5), (3,))),
    {"Cast": 1, "GatherND": 1},
  ),
  "gather_nd_indices_only": (
    jax.vmap(_gnd(), in_axes=(None, 0)),
    (_data((3, 4)), _indices((_B, 2), (3, 4))),
    {"Cast": 1, "GatherND": 1},
  ),
  "gather_nd_indices_only_batch_dims_1": (
    jax.vmap(_gnd(1), in_axes=(None, 0)),
    (_data((2, 3, 4)), _indices((_B, 2, 5), (3,))),
    None,
  ),
  "gather_nd_data_only": (
    jax.vmap(_gnd(), in_axes=(0, None)),
    (_data((_B, 3, 4)), _indices((2,), (3,))),
    None,
  ),
  "gather_nd_axis_1": (
    jax.vmap(_gnd(), in_axes=(1, 2)),
    (_data((3, _B, 4)), np.moveaxis(_indices((_B, 2, 5), (3,)), 0, 2)),
    None,
  ),
  "gather_elements_both": (
    jax.vmap(_ge(0)),
    (_data((_B, 3, 4)), _indices((_B, 5, 4), 3)),
    {"GatherElements": 1},
  ),
  "gather_elements_indices_only": (
    jax.vmap(_ge(0), in_axes=(None, 0)),
    (_data((3, 4)), _indices((_B, 2, 4), 3)),
    None,
  ),
  "gather_elements_data_only": (
    jax.vmap(_ge(-1), in_axes=(0, None)),
    (_data((_B, 2, 3)), _indices((2, 6), 3)),
    None,
  ),
  "scatter_same_tuples": (
    jax.vmap(_snu, in_axes=(0, None, 0)),
    (_data((_B, 3, 4)), np.array([[1, -1], [0, 2]], np.int32), -_data((_B, 2))),
    None,
  ),
  "scatter_data_only": (
    jax.vmap(_snu, in_axes=(0, None, None)),
    (_data((_B, 3, 4)), np.array([[1], [-3]], np.int32), -_data((2, 4))),
    None,
  ),
  "scatter_updates_only": (
    jax.vmap(_snu, in_axes=(None, None, 0)),
    (_data((3, 4)), np.array([[1], [-3]], np.int32), -_data((_B, 2, 4))),
    None,
  ),
  "scatter_all": (
    jax.vmap(_snu),
    (
      _data((_B, 3, 4)),
      np.array([[[1], [0]], [[2], [-1]], [[0], [1]]], np.int32),
      -_data((_B, 2, 4)),
    ),
    None,
  ),
  "scatter_duplicates_per_position": (
    jax.vmap(_snu, in_axes=(None, 0, 0)),
    (
      _data((3, 4)),
      np.array([[[1], [1], [0]], [[2], [-1], [2]], [[0], [0], [0]]], np.int32),
      -_data((_B, 3, 4)),
    ),
    None,
  ),
  **_vmapped_slices("strided_slice", _ss, {"Slice": 1, "Reshape": 1}),
}


@requires_extra
@pytest.mark.parametrize("name", VMAP_CASES)
@pytest.mark.covering_modes
def test_vmap_exports(name):
  fn, args, want = VMAP_CASES[name]
  threads = 1 if "duplicates" in name else 2
  exported = _round_trip(fn, *args, threads=threads)
  counts = census(exported.model)
  op = {
    "gather_nd": "GatherND",
    "gather_elements": "GatherElements",
    "scatter": "ScatterND",
    "strided_slice": "Slice",
  }[
    name.split("_")[0]
    if name.startswith("scatter")
    else "_".join(name.split("_")[:2])
  ]
  assert counts[op] == 1, counts
  if want is not None:
    assert counts == want
  if name.startswith("gather_nd_both") or name == "gather_nd_nested":
    rank = 2 if "nested" in name or "batch_dims_1" in name else 1
    assert _attributes(exported.model, "GatherND")[0]["batch_dims"] == rank


@requires_extra
def test_model_with_several_calls_and_ordinary_layers():
  """Embedding lookup, masking, windows, pooling and a pick: each jaxops call
  one node among ordinary layers, the whole model bit-exact in both runtimes
  (small integer values keep the ordinary float ops exact too)."""
  rng = np.random.default_rng(0)
  vocab, embed, batch, length = 7, 4, 3, 6
  table = rng.integers(-4, 5, (vocab, embed)).astype(np.float32)
  weights = rng.integers(-2, 3, (embed, 5)).astype(np.float32)

  def model(tokens, hidden, target):
    emb = jaxops.gather_nd(table, tokens[..., None])  # [B, L, E]
    where = jnp.stack([jnp.arange(batch, dtype=hidden.dtype), hidden], 1)
    emb = jaxops.scatter_nd_update(
      emb, where, jnp.full((batch, embed), 9, emb.dtype)
    )
    left = jaxops.strided_slice(
      emb, [0, 0], [0, -1], begin_mask=[1, 1], end_mask=[1]
    )  # emb[:, :-1]
    right = jaxops.strided_slice(
      emb, [0, -1], [0, 0], [1, -1], begin_mask=[1], end_mask=[1]
    )  # [:, :0:-1]
    features = jax.nn.relu(left + right * 2.0) @ weights
    picked = jaxops.gather_nd(features, (hidden - 1)[:, None], batch_dims=1)
    return (
      jaxops.gather_elements(picked, target[:, None], axis=1),
      jnp.max(features, axis=1),
    )

  tokens = rng.integers(0, vocab, (batch, length)).astype(np.int32)
  hidden = rng.integers(1, length - 1, batch).astype(np.int32)
  target = rng.integers(-5, 5, batch).astype(np.int32)
  exported = _round_trip(model, tokens, hidden, target)
  counts = census(exported.model)
  assert (
    counts["GatherND"],
    counts["ScatterND"],
    counts["GatherElements"],
    counts["Slice"],
  ) == (2, 1, 1, 2), counts


@requires_extra
def test_jit_caches_do_not_mix_exported_and_normal_traces():
  x, indices = _data((4, 3)), np.array([[1], [-1]], np.int32)
  fn = jax.jit(lambda x, i: jaxops.gather_nd(x, i) * 2)
  before = fn(x, indices)  # a normal trace, cached
  assert census(export(fn, x, indices).model) == {
    "Cast": 1,
    "GatherND": 1,
    "Mul": 1,
  }
  assert_same(fn(x, indices), before)  # still the normal program
  assert_same(
    jax.jit(jax.grad(lambda x: fn(x, indices).sum()))(x),
    np.array([[0, 0, 0], [2, 2, 2], [0, 0, 0], [2, 2, 2]], np.float32),
  )


@requires_extra
def test_openvino_convert_model_is_read_model(monkeypatch):
  """The tests read models with `Core.read_model` (the same ONNX frontend as
  `openvino.convert_model`, minus its telemetry); both give one graph."""
  import openvino as ov

  # convert_model's telemetry forks a process per call, except on CI.
  monkeypatch.setenv("CI", "true")
  exported = export(
    lambda x, i: (
      jaxops.gather_elements(x[:, :2], i, axis=0),
      jaxops.strided_slice(x, [-1], [0], [-2]),
    ),
    _data((4, 3)),
    np.array([[-1, 0], [3, 1]], np.int32),
  )

  def ops(compiled):
    return sorted(
      op.get_type_name() for op in compiled.get_runtime_model().get_ops()
    )

  converted = openvino_compile(exported.model, convert=ov.convert_model)
  assert ops(converted) == ops(openvino_compile(exported.model))
  results = converted(exported.inputs)
  for j, want in enumerate(exported.openvino):
    assert_same(results[converted.output(j)], want)


def test_missing_extra_names_the_install_command(monkeypatch):
  """Simulated: jax2onnx cannot be imported."""
  onnx_module = importlib.import_module("jaxops.onnx")
  for name in [
    name for name in sys.modules if name.split(".")[0] == "jax2onnx"
  ] + ["jax2onnx"]:
    monkeypatch.setitem(sys.modules, name, None)  # "import ... halted"
  for name in [name for name in sys.modules if name.startswith("jaxops.onnx.")]:
    monkeypatch.delitem(sys.modules, name)
  with pytest.raises(ImportError, match=r"pip install 'jaxops\[onnx\]'"):
    onnx_module.to_onnx(lambda x: x, np.zeros(2, np.float32))


@pytest.mark.jax_modes(None)
def test_import_jaxops_imports_no_exporter():
  code = (
    "import sys, jaxops, jaxops.onnx; "
    "print(sorted({m.split('.')[0] for m in sys.modules} & "
    "{'jax2onnx', 'onnx', 'onnx_ir', 'onnxruntime', 'openvino'}))"
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    check=True,
    env=processes.subprocess_env(),
  )
  assert out.stdout.strip() == "[]", out.stdout


# Each operator with a named dynamic dim ("B", "N"): (function, the shape
# of each input, the inputs at one size n of the dynamic dim).
SYMBOLIC_SIZES = (1, 2, 5)
SYMBOLIC_CASES = {
  "gather_nd_batch_dims_1": (
    lambda x, i: jaxops.gather_nd(x, i, 1),
    [("B", 4, 3), ("B", 1)],
    lambda n: (_data((n, 4, 3)), _indices((n,), (4,), n)),
  ),
  "gather_elements": (
    lambda x, i: jaxops.gather_elements(x, i[:, :, None], axis=1),
    [("B", 4, 1), ("B", 2)],
    lambda n: (_data((n, 4, 1)), _indices((n, 2), 4, n)),
  ),
  "gather_batch_dims_1": (
    lambda x, i: jaxops.gather(x, i, 1, 1),
    [("B", 4, 3), ("B", 2)],
    lambda n: (_data((n, 4, 3)), _indices((n, 2), 4, n)),
  ),
  "gather_indices": (
    lambda x, i: jaxops.gather(x, i, -1),
    [(4, 3), ("N", 2)],
    lambda n: (_data((4, 3)), _indices((n, 2), 3, n)),
  ),
  "scatter_nd_update_tuples": (
    lambda x, i, u: jaxops.scatter_nd_update(x, i, u),
    [(6, 3), ("N", 1), ("N", 3)],
    lambda n: (
      _data((6, 3)),
      gen.random_indices(
        np.random.default_rng(n), (6,), (n,), np.int32, unique=True
      ),
      -_data((n, 3)),
    ),
  ),
  # The indexed dim, the tuples and the updates share the dynamic dim.
  "scatter_nd_update_indexed_dim": (
    lambda x, i, u: jaxops.scatter_nd_update(x, i, u),
    [("N", 3), ("N", 1), ("N", 3)],
    lambda n: (
      _data((n, 3)),
      gen.random_indices(
        np.random.default_rng(n), (n,), (n,), np.int32, unique=True
      ),
      -_data((n, 3)),
    ),
  ),
  "vmap_scatter_nd_update": (
    jax.vmap(_snu),
    [("B", 4, 3), ("B", 1), ("B", 3)],
    lambda n: (_data((n, 4, 3)), _indices((n,), (4,), n), -_data((n, 3))),
  ),
  "scatter_elements_update_sum": (
    lambda x, i, u: jaxops.scatter_elements_update(x, i, u, 1, reduction="sum"),
    [("B", 4), ("B", 2), ("B", 2)],
    lambda n: (
      _data((n, 4)),
      _indices((n, 2), 4, n),
      -_data((n, 2)),
    ),
  ),
  # The scatter axis and the updates along it dynamic, every row a
  # permutation of it (negative indices included).
  "scatter_elements_update_axis": (
    lambda x, i, u: jaxops.scatter_elements_update(x, i, u, 1),
    [(2, "N"), (2, "N"), (2, "N")],
    lambda n: (
      _data((2, n)),
      np.stack(
        [
          gen.random_indices(
            np.random.default_rng(n + row), (n,), (n,), np.int32, unique=True
          )[:, 0]
          for row in range(2)
        ]
      ),
      -_data((2, n)),
    ),
  ),
  "strided_slice": (
    lambda x: jaxops.strided_slice(
      x,
      [0, -1, 1],
      [0, 0, 0],
      [1, -2, 1],
      begin_mask=[1],
      end_mask=[1, 1],
      shrink_axis_mask=[0, 0, 1],
    ),
    [("B", 4, 3)],
    lambda n: (_data((n, 4, 3)),),
  ),
  "slice": (
    lambda x: jaxops.slice(x, [-1, 1], [-(2**63), 3], [-2, 1], [1, 2]),
    [("B", 4, 3)],
    lambda n: (_data((n, 4, 3)),),
  ),
}


@pytest.mark.exhaustive(default=2)
@requires_extra
@pytest.mark.parametrize("name", SYMBOLIC_CASES)
def test_symbolic_dims_pass_through(name):
  """One model with a dynamic dim; both runtimes run it at several sizes
  and equal jaxops bit for bit."""
  fn, shapes, args_at = SYMBOLIC_CASES[name]
  specs = [
    jax.ShapeDtypeStruct(shape, np.asarray(arg).dtype)
    for shape, arg in zip(shapes, args_at(1))
  ]
  model = _onnx().to_onnx(fn, *specs)
  dims = [
    [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    for v in model.graph.input
  ]
  assert dims == [list(shape) for shape in shapes], dims
  for n in SYMBOLIC_SIZES:
    args = list(args_at(n))
    exported = Exported(model, args)
    expected = jax.tree.leaves(jax.jit(fn)(*args))
    check_round_trip(exported, expected, lambda j, n=n: f"size {n}, out {j}")


@requires_extra
def test_symbolic_dims_must_pass_through():
  spec = jax.ShapeDtypeStruct(("B", 3), np.float32)
  with pytest.raises(ValueError, match="symbolic dims .* pass through"):
    _onnx().to_onnx(lambda x: jaxops.strided_slice(x, [-1], [0], [-1]), spec)


# Gather-8 and Slice-8 --------------------------------------------------------


def _gather_census(case) -> dict[str, int]:
  """Gather(axis) for batch_dims 0 (indices int32 in the model: no Cast);
  else Cast, Unsqueeze, an Expand where data has dims of size > 1 between
  the batch dims and axis, and GatherND."""
  axis = case.axis % case.data.ndim
  b = (
    case.batch_dims + case.indices.ndim
    if case.batch_dims < 0
    else (case.batch_dims)
  )
  if b == 0:
    return {"Gather": 1}
  expand = any(d != 1 for d in case.data.shape[b:axis])
  return {"Cast": 1, "Unsqueeze": 1, "GatherND": 1} | (
    {"Expand": 1} if expand else {}
  )


def _gather8_trip(seed: int) -> RoundTrip:
  case = gs.random_gather_case(seed, dtypes=gen.ORACLE_DTYPES)
  return RoundTrip(
    lambda d, i: jaxops.gather(d, i, case.axis, case.batch_dims),
    (case.data, case.indices),
    case.describe(),
    _gather_census(case),
  )


@pytest.mark.exhaustive(default=2)
@requires_extra
@over_chunks(len(GATHER_SEEDS), "seeds")
def test_gather8_round_trips(chunk):
  """Gather-8, in-range indices: Gather(axis), or for batch dims the
  GatherND composite (which OpenVINO reads back as GatherND-8)."""
  check_round_trips(_gather8_trip, chunk)


SLICE_CASES = [
  ss_spec
  for ss_spec in [
    sl.random_spec(np.random.default_rng(seed)) for seed in range(120)
  ]
] + [
  sl.SliceSpec((10,), (b,), (e,), (k,), (0,))
  for b, e, k in [
    (9, 2**31 - 1, -1),  # onnxruntime's INT_MAX reading (docs/export.md)
    (9, 2**63 - 1, -2),
    (9, -(2**63), -(2**63)),  # OpenVINO's SIGFPE step
    (9, -(2**63), -(2**31)),
    (-(2**63), 2**63 - 1, 2**63 - 1),
    (-5, -5, -1),
  ]
]


def _slice8_trip(j: int) -> RoundTrip:
  spec = SLICE_CASES[j]
  return RoundTrip(
    lambda x: jaxops.slice(x, spec.start, spec.stop, spec.step, spec.axes),
    (_slice_data(j, spec),),
    spec.describe(),
    lambda counts: set(counts) <= {"Slice"} and counts.get("Slice", 0) <= 1,
  )


@requires_extra
@over_chunks(len(SLICE_CASES))
def test_slice8_round_trips(chunk):
  """Slice-8: one Slice of the resolved plan (none where it keeps all of
  data), exact in both runtimes for the int64 extremes that trip them when
  given as they are."""
  check_round_trips(_slice8_trip, chunk)


def _gather8(axis=0, batch_dims=0, **options):
  return lambda data, indices: jaxops.gather(
    data, indices, axis, batch_dims, **options
  )


def _slice8(data):
  return jaxops.slice(data, [-1, 1], [-(2**63), 2**63 - 1], [-2, 2], [1, -1])


GATHER8_VMAP_CASES = {
  "both": (
    jax.vmap(_gather8(1)),
    (_data((_B, 3, 4)), _indices((_B, 2), 4)),
    {"Cast": 1, "Unsqueeze": 1, "Expand": 1, "GatherND": 1},
  ),
  "indices_only": (
    jax.vmap(_gather8(1), in_axes=(None, 0)),
    (_data((3, 4)), _indices((_B, 2), 4)),
    {"Gather": 1, "Transpose": 1},  # the batch dim lands at the axis
  ),
  "data_only_batch_dims_1": (
    jax.vmap(_gather8(1, 1), in_axes=(0, None)),
    (_data((_B, 3, 4)), _indices((3, 5), 4)),
    None,
  ),
  **_vmapped_slices("slice", _slice8, {"Slice": 1}),
}


@requires_extra
@pytest.mark.parametrize("name", GATHER8_VMAP_CASES)
def test_gather8_slice8_vmap_exports(name):
  fn, args, want = GATHER8_VMAP_CASES[name]
  counts = census(_round_trip(fn, *args).model)
  if want is not None:
    assert counts == want
  assert (
    counts.get("Gather", 0) + counts.get("GatherND", 0) + counts.get("Slice", 0)
    == 1
  ), counts


@requires_extra
def test_gather8_clip_and_out_of_range():
  """mode="clip" exports the clamp (exact in both runtimes). The default
  mode leaves out-of-range indices to the runtime: onnxruntime rejects them,
  OpenVINO reads zeros (its Gather-8 rule, so the exported model agrees
  with jaxops there; docs/export.md#gather)."""
  x = _data((4, 3))
  indices = np.array([[5, -1], [-9, 2]], np.int32)
  exported = _round_trip(_gather8(0, mode="clip"), x, indices)
  assert census(exported.model) == {"Max": 1, "Min": 1, "Gather": 1}
  exported = export(_gather8(1), x, indices)
  with pytest.raises(Exception, match="out of data bounds"):
    _ = exported.onnxruntime
  (got,) = exported.openvino
  assert_same(got, jaxops.gather(x, indices, 1))
  assert_same(got[0, 0, 0], np.float32(0))
