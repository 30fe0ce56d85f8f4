"""Peer runtimes: one-op models in OpenVINO (CPU plugin) and onnxruntime.

Both get the same thread count as the JAX side has cores to use (2 by
default; onnxruntime's threads do not spin between runs, so they leave the
cores to the next variant), and OpenVINO is forced to f32 inference precision (its CPU plugin
may otherwise pick bf16 on hardware that has it). Inputs are bound once and
shared with NumPy (no per-call copy), and onnxruntime writes into a
preallocated output, so a timed call is the kernel plus the runtime's own
dispatch -- the same thing the JAX side times. If a runtime is not installed
its variant is skipped with a note (`missing()`).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.harness import Runner


def missing() -> dict[str, str]:
  """Peer packages that are not importable, with the reason."""
  out = {}
  for name in ("openvino", "onnxruntime", "onnx"):
    if importlib.util.find_spec(name) is None:
      out[name] = f"{name} is not installed (pip install -e '.[bench]')"
  return out


def versions() -> dict[str, str]:
  out = {}
  for name in ("openvino", "onnxruntime", "onnx"):
    try:
      module = __import__(name)
      out[name] = getattr(module, "__version__", "?")
    except ImportError:
      out[name] = "not installed"
  return out


def openvino_opset():
  """The OpenVINO opset module the one-op models are built from (lazy import)."""
  import openvino.opset8 as ops
  return ops


def onnx_node(op_type: str, inputs: Sequence[str], **attrs: Any):
  """A one-output ONNX node writing "y", for `onnx_model`."""
  from onnx import helper
  return helper.make_node(op_type, list(inputs), ["y"], **attrs)


def openvino_runner(make_node: Callable[..., Any],
                    inputs: Sequence[np.ndarray], threads: int) -> Runner:
  """Compiles `make_node(*parameters)` on the CPU plugin (compile timed)."""
  import openvino as ov
  import openvino.opset8 as ops
  inputs = [np.ascontiguousarray(a) for a in inputs]
  params = [ops.parameter(list(a.shape), a.dtype) for a in inputs]
  model = ov.Model([make_node(*params)], params)
  config = {"INFERENCE_NUM_THREADS": threads,
            "INFERENCE_PRECISION_HINT": "f32"}
  start = time.perf_counter()
  compiled = ov.Core().compile_model(model, "CPU", config)
  request = compiled.create_infer_request()
  compile_s = time.perf_counter() - start
  tensors = [ov.Tensor(a, shared_memory=True) for a in inputs]
  for i, tensor in enumerate(tensors):
    request.set_input_tensor(i, tensor)

  def call(_):
    request.infer()
    return tensors  # keeps the shared buffers alive

  def outputs(_):
    return [np.array(request.get_output_tensor(0).data, copy=True)]

  return Runner(compile_s, call, outputs)


def onnx_model(nodes: Sequence[Any], inputs: Sequence[np.ndarray],
               initializers: dict[str, np.ndarray] | None = None,
               opset: int = 18):
  """A ModelProto with inputs x0, x1, ... (shapes of `inputs`) and output y."""
  from onnx import helper, numpy_helper
  values = [
      helper.make_tensor_value_info(
          f"x{i}", helper.np_dtype_to_tensor_dtype(_onnx_dtype(a.dtype)),
          list(a.shape)) for i, a in enumerate(inputs)
  ]
  output = helper.make_tensor_value_info(
      "y", helper.np_dtype_to_tensor_dtype(inputs[0].dtype), None)
  inits = [numpy_helper.from_array(v, name=k)
           for k, v in (initializers or {}).items()]
  graph = helper.make_graph(list(nodes), "bench", values, [output], inits)
  return helper.make_model(graph,
                           opset_imports=[helper.make_opsetid("", opset)])


def _onnx_dtype(dtype: np.dtype) -> np.dtype:
  # ONNX GatherND/ScatterND take int64 indices only.
  return np.dtype(np.int64) if np.issubdtype(dtype, np.integer) else dtype


def onnxruntime_runner(model, inputs: Sequence[np.ndarray],
                       out_shape: Sequence[int], threads: int) -> Runner:
  """Creates an onnxruntime CPU session (timed) with bound inputs/output."""
  import onnxruntime as ort
  inputs = [np.ascontiguousarray(a.astype(_onnx_dtype(a.dtype), copy=False))
            for a in inputs]
  options = ort.SessionOptions()
  options.intra_op_num_threads = threads
  options.inter_op_num_threads = 1
  # onnxruntime's pool threads busy-wait after each run by default, which
  # would steal the cores from whatever variant is timed next.
  options.add_session_config_entry("session.intra_op.allow_spinning", "0")
  start = time.perf_counter()
  session = ort.InferenceSession(model.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"])
  compile_s = time.perf_counter() - start
  out = np.empty(tuple(out_shape), dtype=inputs[0].dtype)
  binding = session.io_binding()
  for i, a in enumerate(inputs):
    binding.bind_cpu_input(f"x{i}", a)
  binding.bind_output("y", "cpu", 0, out.dtype, list(out.shape),
                      out.ctypes.data)

  def call(_):
    session.run_with_iobinding(binding)
    return inputs  # keeps the bound buffers alive

  return Runner(compile_s, call, lambda _: [out.copy()])
