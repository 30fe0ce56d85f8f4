"""Export functions that call jaxops operators to ONNX.

`to_onnx(fn, *example_args)` traces `fn` with jax2onnx while every jaxops
call in it binds its export primitive (`jaxops._export`; each operator's in
its own module), and lowers each such call to one ONNX node of its own kind:
Gather, GatherND, GatherElements, ScatterND, ScatterElements, or Slice
(StridedSlice: plus at most one Squeeze/Unsqueeze/Reshape; Gather with batch
dims: a GatherND after an Unsqueeze and Expand of its indices; the scatter
reductions ONNX has no node for -- ScatterNDUpdate `sub`, ScatterElementsUpdate
`mean` and `use_init_val=False` -- a small composite with the same bits) (the
lowerings: one module per operator in this package,
`jaxops/onnx/_<operator>.py`).
The rest of `fn` is lowered by jax2onnx as usual. The model runs in
onnxruntime, and OpenVINO reads it (`openvino.convert_model`). Mapping,
semantics of out-of-range indices and duplicates, and dtypes:
docs/export.md.

Needs the optional extra, which `import jaxops` never imports:
`pip install 'jaxops[onnx]'` (jax2onnx and onnx; Python >= 3.11).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxops import _export

# The extra's pins, also in pyproject.toml's [project.optional-dependencies].
SUPPORTED_JAX2ONNX = ">=0.17.1,<0.18"
_MISSING = (
  "jaxops.onnx needs the optional 'onnx' extra (jax2onnx "
  f"{SUPPORTED_JAX2ONNX} and onnx; Python >= 3.11): "
  "pip install 'jaxops[onnx]'"
)
_EXTRA_MODULES = ("jax2onnx", "onnx", "onnx_ir")
# One lowering module per operator, each a jax2onnx plugin of its primitive.
_LOWERINGS = (
  "_gather",
  "_gather_elements",
  "_gather_nd",
  "_scatter_elements_update",
  "_scatter_nd_update",
  "_slice",
  "_strided_slice",
)


def _load_exporter() -> Any:
  """Imports the plugins and returns jax2onnx, or raises ImportError naming
  the extra."""
  try:
    for lowering in _LOWERINGS:
      importlib.import_module(f"{__name__}.{lowering}")
    return importlib.import_module("jax2onnx")
  except ImportError as e:
    missing = (getattr(e, "name", None) or "").split(".")[0]
    if isinstance(e, ModuleNotFoundError) and missing in _EXTRA_MODULES:
      raise ImportError(f"{_MISSING} ({e})") from e
    raise ImportError(
      f"{_MISSING}; the installed jax2onnx does not provide the plugin "
      f"API jaxops uses ({e})"
    ) from e


def _spec(leaf: Any) -> jax.ShapeDtypeStruct:
  if isinstance(leaf, jax.ShapeDtypeStruct):
    return leaf
  if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
    leaf = np.asarray(leaf)
  return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype)


def to_onnx(fn: Callable[..., Any], *example_args: Any, **options: Any) -> Any:
  """Exports `fn`, with each jaxops call as one ONNX node.

  Args:
    fn: a function of arrays whose body calls jaxops operators among
      ordinary JAX code (`jit`, `vmap` and the operators' keyword options
      included). Values it closes over (weights) become initializers.
    *example_args: one example per argument of `fn`, giving shape and dtype:
      arrays, `jax.ShapeDtypeStruct`s, or pytrees of them. The model's inputs
      are their leaves in order (`in_0`, `in_1`, ...). A dim given as a
      string in a `jax.ShapeDtypeStruct` is a symbolic dim, where jax2onnx
      and the operators' shape rules allow one.
    **options: passed to `jax2onnx.to_onnx`: e.g. `model_name`, `opset`
      (default 23), `input_names`, `output_names`, and
      `enable_double_precision` (default False: the model is traced with 64-bit
      types off, so float64 and int64 arguments become float32 and int32
      inputs; True keeps 64-bit types and makes every float a double).

  Returns:
    The `onnx.ModelProto` (or what jax2onnx's `return_mode` option selects).

  Raises:
    ImportError: the `onnx` extra is not installed
      (`pip install 'jaxops[onnx]'`).

  Example (not run here; it needs the extra)::

    import jax.numpy as jnp, numpy as np, jaxops, jaxops.onnx

    def pick(table, rows):
      return jnp.tanh(jaxops.gather_nd(table, rows))

    model = jaxops.onnx.to_onnx(pick, np.zeros((10, 4), np.float32),
                                np.zeros((3, 1), np.int64))
    [node.op_type for node in model.graph.node]  # ['Cast', 'GatherND', 'Tanh']
  """
  jax2onnx = _load_exporter()
  leaves, tree = jax.tree.flatten(example_args)
  double = bool(options.pop("enable_double_precision", False))

  def flat_fn(*flat):
    return fn(*jax.tree.unflatten(tree, flat))

  # jax2onnx switches 64-bit mode for the trace with the global setting,
  # which a `jax.enable_x64` context would override (and the switch back
  # would then leak): set it as a context here, where it takes effect.
  with jax.enable_x64(double), _export.exporting():
    return jax2onnx.to_onnx(
      flat_fn,
      [_spec(leaf) for leaf in leaves],
      enable_double_precision=double,
      **options,
    )
