"""Collection rules for the whole repository (tests/ and the doctests of
jaxops/).

`jaxops/_onnx_plugins.py` imports jax2onnx, from the optional `onnx` extra,
which cannot be installed below Python 3.11: there, its doctest module is not
collected (tests/test_onnx_export.py skips with the reason).
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("jax2onnx") is None:
  collect_ignore.append("jaxops/_onnx_plugins.py")
