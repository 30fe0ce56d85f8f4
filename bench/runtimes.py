"""Peer runtimes: OpenVINO (CPU plugin), onnxruntime and PyTorch on the CPU.

All get the same thread count as the JAX side has cores to use (2 by
default). None of them busy-waits between calls, so they leave the cores to
the next variant of the round-robin: onnxruntime's pool has spinning turned
off, and PyTorch's OpenMP threads sleep at once (`OMP_WAIT_POLICY=PASSIVE`,
set by `prepare_environment` before torch is imported). OpenVINO is forced
to f32 inference precision (its CPU plugin may otherwise pick bf16 on
hardware that has it). Inputs are bound once and shared with NumPy (no
per-call copy), and onnxruntime writes into a preallocated output, so a timed
call is the kernel plus the runtime's own dispatch -- the same thing the JAX
side times. PyTorch runs eagerly under `torch.inference_mode()` (forward) or
autograd (fwd+bwd); indices are converted to int64 once, before the clock,
as for onnxruntime. A runtime that is not installed has its variants skipped
with a note (`missing()`); PyTorch is optional and not in the `bench` extra
(see bench/README.md).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.harness import Runner

PACKAGES = ("openvino", "onnxruntime", "onnx", "torch")
TORCH_INSTALL = (
  "pip install torch==2.13.0 with a CPU-only wheel, see bench/README.md"
)


def prepare_environment() -> None:
  """Settings the peers read when their libraries load; call before import.

  PyTorch's OpenMP threads otherwise spin after every parallel region and
  take the cores from the variant timed next.
  """
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def missing() -> dict[str, str]:
  """Peer packages that are not importable, with the reason."""
  out = {}
  for name in PACKAGES:
    if importlib.util.find_spec(name) is None:
      how = TORCH_INSTALL if name == "torch" else "pip install -e '.[bench]'"
      out[name] = f"{name} is not installed ({how})"
  return out


def versions() -> dict[str, str]:
  """Version of each peer package (imports them)."""
  out = {}
  for name in PACKAGES:
    try:
      module = __import__(name)
      out[name] = getattr(module, "__version__", "?")
    except ImportError:
      out[name] = "not installed"
  return out


def openvino_opset():
  """The OpenVINO opset module the one-op models are built from (lazy)."""
  import openvino.opset8 as ops

  return ops


def onnx_node(op_type: str, inputs: Sequence[str], **attrs: Any):
  """A one-output ONNX node writing "y", for `onnx_model`."""
  from onnx import helper

  return helper.make_node(op_type, list(inputs), ["y"], **attrs)


def openvino_runner(
  make_node: Callable[..., Any], inputs: Sequence[np.ndarray], threads: int
) -> Runner:
  """Compiles `make_node(*parameters)` on the CPU plugin (compile timed)."""
  import openvino as ov
  import openvino.opset8 as ops

  inputs = [np.ascontiguousarray(a) for a in inputs]
  params = [ops.parameter(list(a.shape), a.dtype) for a in inputs]
  model = ov.Model([make_node(*params)], params)
  config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
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


def onnx_model(
  nodes: Sequence[Any],
  inputs: Sequence[np.ndarray],
  initializers: dict[str, np.ndarray] | None = None,
  opset: int = 18,
):
  """A ModelProto with inputs x0, x1, ... (shapes of `inputs`) and output y."""
  from onnx import helper, numpy_helper

  values = [
    helper.make_tensor_value_info(
      f"x{i}",
      helper.np_dtype_to_tensor_dtype(_onnx_dtype(a.dtype)),
      list(a.shape),
    )
    for i, a in enumerate(inputs)
  ]
  output = helper.make_tensor_value_info(
    "y", helper.np_dtype_to_tensor_dtype(inputs[0].dtype), None
  )
  inits = [
    numpy_helper.from_array(v, name=k) for k, v in (initializers or {}).items()
  ]
  graph = helper.make_graph(list(nodes), "bench", values, [output], inits)
  return helper.make_model(
    graph, opset_imports=[helper.make_opsetid("", opset)]
  )


def _onnx_dtype(dtype: np.dtype) -> np.dtype:
  # ONNX GatherND/ScatterND take int64 indices only.
  return np.dtype(np.int64) if np.issubdtype(dtype, np.integer) else dtype


def onnxruntime_runner(
  model, inputs: Sequence[np.ndarray], out_shape: Sequence[int], threads: int
) -> Runner:
  """Creates an onnxruntime CPU session (timed) with bound inputs/output."""
  import onnxruntime as ort

  inputs = [
    np.ascontiguousarray(a.astype(_onnx_dtype(a.dtype), copy=False))
    for a in inputs
  ]
  options = ort.SessionOptions()
  options.intra_op_num_threads = threads
  options.inter_op_num_threads = 1
  # onnxruntime's pool threads busy-wait after each run by default, which
  # would steal the cores from whatever variant is timed next.
  options.add_session_config_entry("session.intra_op.allow_spinning", "0")
  start = time.perf_counter()
  session = ort.InferenceSession(
    model.SerializeToString(), options, providers=["CPUExecutionProvider"]
  )
  compile_s = time.perf_counter() - start
  out = np.empty(tuple(out_shape), dtype=inputs[0].dtype)
  binding = session.io_binding()
  for i, a in enumerate(inputs):
    binding.bind_cpu_input(f"x{i}", a)
  binding.bind_output(
    "y", "cpu", 0, out.dtype, list(out.shape), out.ctypes.data
  )

  def call(_):
    session.run_with_iobinding(binding)
    return inputs  # keeps the bound buffers alive

  return Runner(compile_s, call, lambda _: [out.copy()])


def _torch_tensors(inputs: Sequence[np.ndarray]):
  import torch

  return [
    torch.from_numpy(
      np.ascontiguousarray(
        a.astype(np.int64, copy=False)
        if np.issubdtype(a.dtype, np.integer)
        else a
      )
    )
    for a in inputs
  ]


def torch_runner(
  fn: Callable[..., Any], inputs: Sequence[np.ndarray], threads: int
) -> Runner:
  """`fn(*tensors)` eagerly under `torch.inference_mode()`."""
  import torch

  torch.set_num_threads(threads)
  tensors = _torch_tensors(inputs)

  def call(_):
    with torch.inference_mode():
      return fn(*tensors)

  return Runner(None, call, lambda out: [out.numpy().copy()])


def torch_inplace_runner(
  fn: Callable[..., Any],
  inputs: Sequence[np.ndarray],
  argnum: int,
  threads: int,
) -> Runner:
  """`fn(*tensors)` writing into a fresh copy of `tensors[argnum]`.

  The copy is made before the clock starts, as for a donated JAX buffer.
  """
  import torch

  torch.set_num_threads(threads)
  tensors = _torch_tensors(inputs)

  def setup():
    fresh = list(tensors)
    fresh[argnum] = tensors[argnum].clone()
    return fresh

  def call(fresh):
    with torch.inference_mode():
      fn(*fresh)
    return fresh[argnum]

  return Runner(None, call, lambda out: [out.numpy().copy()], setup=setup)


def torch_grad_runner(
  fn: Callable[..., Any],
  inputs: Sequence[np.ndarray],
  weights: np.ndarray,
  argnums: Sequence[int],
  threads: int,
) -> Runner:
  """Loss `sum(fn(*tensors) * w)` and its gradient w.r.t. `argnums`.

  Returns the same leaves as `jax.value_and_grad`: the loss, then one
  gradient per differentiated argument.
  """
  import torch

  torch.set_num_threads(threads)
  tensors = [
    t.requires_grad_() if i in argnums else t
    for i, t in enumerate(_torch_tensors(inputs))
  ]
  w = torch.from_numpy(np.ascontiguousarray(weights))
  wrt = [tensors[i] for i in argnums]

  def call(_):
    loss = (fn(*tensors) * w).sum()
    return loss, torch.autograd.grad(loss, wrt)

  def outputs(out):
    loss, grads = out
    return [loss.detach().numpy().copy()] + [g.numpy().copy() for g in grads]

  return Runner(None, call, outputs)
