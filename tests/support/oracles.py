"""Reference runtimes used as oracles by the differential tests.

Each oracle runs one operator in a real runtime on NumPy inputs:

* `openvino_cpu(make_node, inputs)`: a one-op model compiled on OpenVINO's CPU
  plugin (f32 inference precision forced, so f32 stays f32).
* `onnxruntime(op_type, inputs, attrs, opset)`: a one-node ONNX model run by
  onnxruntime's CPU provider.

Both run on `THREADS` (2) threads unless `threads=` says otherwise: tests of
duplicate ScatterND tuples ask for 1, the only count on which the runtimes
apply them in order (docs/semantics.md#duplicates).
* `onnx_node_cases(op_type)`: the node test cases that ship inside the
  installed `onnx` package (`onnx.backend.test.case.node`).

Compiled models and sessions are cached per (op, attributes, input shapes and
dtypes), so a test module that draws a few hundred cases pays each compile
once per distinct signature. The oracle packages are imported lazily: a test
module that needs one uses `pytest.importorskip` at the top only where the
package is genuinely optional -- in this project they are part of the `test`
extra, so a missing oracle is an installation error, not a skip.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# 2 threads, as the benchmark; 1 where the order of duplicate ScatterND
# tuples matters (the runtimes keep it on one thread only:
# docs/semantics.md#duplicates).
THREADS = 2


def _ov_config(threads: int) -> dict[str, Any]:
  return {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}


@functools.cache
def _ov_core():
  import openvino as ov

  return ov.Core()


def _signature(inputs: Sequence[np.ndarray]) -> tuple:
  return tuple((a.shape, a.dtype.name) for a in inputs)


def _ov_type(dtype: Any) -> Any:
  """The OpenVINO element type of a NumPy dtype (bfloat16 included)."""
  import openvino as ov

  dtype = np.dtype(dtype)
  return ov.Type.bf16 if dtype.name == "bfloat16" else dtype


def _ov_tensor(a: np.ndarray) -> Any:
  """An OpenVINO tensor of `a`; bfloat16 by its bits (the Python API has no
  NumPy bfloat16)."""
  import openvino as ov

  if a.dtype.name != "bfloat16":
    return a
  tensor = ov.Tensor(ov.Type.bf16, list(a.shape))
  tensor.data.view(np.uint16)[...] = a.view(np.uint16)
  return tensor


def _from_ov(result: Any, dtype: Any) -> np.ndarray:
  """An OpenVINO output as `dtype` (bfloat16 comes back as float16 bits)."""
  result = np.asarray(result)
  if np.dtype(dtype).name == "bfloat16":
    return result.view(np.uint16).view(dtype)
  return result


@functools.lru_cache(maxsize=512)
def _ov_compiled(
  make_node: Callable, key: Any, signature: tuple, threads: int = THREADS
):
  import openvino as ov
  import openvino.opset8 as opset

  params = [
    opset.parameter(list(shape), _ov_type(_dtype(dtype)))
    for shape, dtype in signature
  ]
  node = make_node(*params)
  model = ov.Model([node], params)
  return _ov_core().compile_model(model, "CPU", _ov_config(threads))


def _dtype(name: str) -> np.dtype:
  import ml_dtypes

  return np.dtype(getattr(ml_dtypes, name, None) or name)


def openvino_cpu(
  make_node: Callable,
  inputs: Sequence[np.ndarray],
  key: Any = None,
  threads: int = THREADS,
) -> np.ndarray:
  """Runs `make_node(*parameters)` on OpenVINO's CPU plugin.

  Args:
    make_node: builds the op node from OpenVINO `Parameter` nodes, one per
      input, e.g. `lambda d, i: openvino.opset8.gather_nd(d, i, 2)`. It must be
      hashable and, with `key`, identify the op and its attributes: pass a
      module-level function and put the attributes in `key`, or use
      `functools.partial` with hashable arguments.
    inputs: NumPy arrays; the parameters take their shapes and dtypes.
    key: extra cache key (hashable), for attributes not in `make_node`.
    threads: the plugin's inference threads.
  """
  inputs = [np.asarray(a, order="C") for a in inputs]
  compiled = _ov_compiled(make_node, key, _signature(inputs), threads)
  result = compiled([_ov_tensor(a) for a in inputs])[0]
  return _from_ov(result, inputs[0].dtype)


def openvino_cpu_many(
  make_nodes: Sequence[Callable],
  inputs: Sequence[Sequence[np.ndarray]],
  threads: int = THREADS,
) -> list[np.ndarray]:
  """Runs many independent one-op graphs as one OpenVINO CPU model.

  `make_nodes[j](*parameters_j)` builds graph j from Parameters shaped like
  `inputs[j]`; the model has one output per graph, so a batch of random cases
  with distinct shapes costs one compile instead of one each (compiles
  dominate the time of differential tests). Not cached. Each output has
  its graph's first input's dtype.
  """
  import openvino as ov
  import openvino.opset8 as opset

  params, outputs, feeds = [], [], []
  for make_node, case_inputs in zip(make_nodes, inputs, strict=True):
    case_inputs = [np.asarray(a, order="C") for a in case_inputs]
    case_params = [
      opset.parameter(list(a.shape), _ov_type(a.dtype)) for a in case_inputs
    ]
    outputs.append(make_node(*case_params))
    params += case_params
    feeds += [_ov_tensor(a) for a in case_inputs]
  if not outputs:
    return []
  model = ov.Model(outputs, params)
  compiled = _ov_core().compile_model(model, "CPU", _ov_config(threads))
  results = compiled(feeds)
  return [
    _from_ov(results[compiled.output(j)], case_inputs[0].dtype)
    for j, case_inputs in enumerate(inputs)
  ]


def openvino_reference(
  make_node: Callable,
  inputs: Sequence[np.ndarray],
  out_shape: Sequence[int],
  out_dtype: Any,
) -> np.ndarray:
  """Runs OpenVINO's reference evaluator (`Node.evaluate`) where it exists.

  Used where the CPU plugin is known to be wrong (docs/semantics.md#errata and
  #runtime-bugs). Raises
  NotImplementedError when the node has no reference evaluator in Python.
  """
  import openvino as ov
  import openvino.opset8 as opset

  params = [opset.parameter(list(a.shape), a.dtype) for a in inputs]
  node = make_node(*params)
  out = ov.Tensor(np.zeros(tuple(out_shape), dtype=out_dtype))
  ok = node.evaluate(
    [out], [ov.Tensor(np.asarray(a, order="C")) for a in inputs]
  )
  if not ok:
    raise NotImplementedError(
      f"no reference evaluator for {node.get_type_name()}"
    )
  return np.array(out.data, copy=True)


@functools.lru_cache(maxsize=512)
def _ort_session(
  op_type: str, attrs: tuple, opset: int, signature: tuple, threads: int
):
  import onnxruntime as ort
  from onnx import helper

  names = [f"x{i}" for i in range(len(signature))]
  inputs = [
    helper.make_tensor_value_info(
      name, helper.np_dtype_to_tensor_dtype(_dtype(dtype)), list(shape)
    )
    for name, (shape, dtype) in zip(names, signature)
  ]
  # Every operator here returns data's (the first input's) dtype.
  output = helper.make_tensor_value_info(
    "y", inputs[0].type.tensor_type.elem_type, None
  )
  node = helper.make_node(op_type, names, ["y"], **dict(attrs))
  graph = helper.make_graph([node], op_type, inputs, [output])
  model = helper.make_model(
    graph, opset_imports=[helper.make_opsetid("", opset)]
  )
  options = ort.SessionOptions()
  options.intra_op_num_threads = threads
  options.inter_op_num_threads = 1
  return ort.InferenceSession(
    model.SerializeToString(), options, providers=["CPUExecutionProvider"]
  )


def onnxruntime(
  op_type: str,
  inputs: Sequence[np.ndarray],
  attrs: dict[str, Any] | None = None,
  opset: int = 18,
  threads: int = THREADS,
) -> np.ndarray:
  """Runs one ONNX node of `op_type` with `attrs` in onnxruntime's CPU
  provider on `threads` intra-op threads."""
  inputs = [np.asarray(a, order="C") for a in inputs]
  attr_key = tuple(sorted((attrs or {}).items()))
  session = _ort_session(op_type, attr_key, opset, _signature(inputs), threads)
  feeds = {f"x{i}": a for i, a in enumerate(inputs)}
  return session.run(None, feeds)[0]


@functools.cache
def _node_cases_of(op_type: str) -> tuple[Any, ...]:
  """The cases of `op_type`'s own module of `onnx.backend.test.case.node`
  (ScatterND's are in `scatternd`, and so on). Importing that module alone
  runs only its cases' NumPy references; `collect_testcases` imports every
  operator's module and spent 9-15 s of each test process's collection in
  the pooling operators' references. The same cases either way: each case
  registers itself in the package's list when its module is imported."""
  import importlib

  from onnx.backend.test.case import node as onnx_node

  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    importlib.import_module(f"{onnx_node.__name__}.{op_type.lower()}")
  return tuple(
    case
    for case in onnx_node._NodeTestCases  # the package's registry
    if len(case.model.graph.node) == 1
    and case.model.graph.node[0].op_type == op_type
  )


def onnx_node_cases(
  op_type: str,
) -> list[tuple[str, list[np.ndarray], np.ndarray, dict[str, Any]]]:
  """The `onnx` package's own node tests for `op_type`.

  Returns `(name, inputs, expected_output, attributes)` for every data set of
  every case whose single node has that op type.
  """
  from onnx import helper

  cases = []
  for case in _node_cases_of(op_type):
    nodes = case.model.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in nodes[0].attribute}
    for j, (inputs, outputs) in enumerate(case.data_sets or ()):
      name = case.name if j == 0 else f"{case.name}_{j}"
      cases.append((name, list(inputs), outputs[0], attrs))
  return cases
