"""Shape rules of the operators, as pure functions over shapes.

Each function takes the input shapes and static attributes of one operator and
returns its output shape, raising the same ValueError/TypeError the operator
raises at trace time. No arrays are needed, so converter authors can run
OpenVINO/ONNX shape inference with them. The rules, and where they differ
from the spec texts: docs/semantics.md.

>>> from jaxops import shapes
>>> shapes.gather_nd((30, 2, 100, 35), (30, 2, 3, 1), batch_dims=2)
(30, 2, 3, 35)
"""

from jaxops._gather import gather_shape as gather
from jaxops._gather_elements import gather_elements_shape as gather_elements
from jaxops._gather_nd import gather_nd_shape as gather_nd
from jaxops._scatter_elements_update import (
  scatter_elements_update_shape as scatter_elements_update,
)
from jaxops._scatter_nd_update import (
  scatter_nd_update_shape as scatter_nd_update,
)
from jaxops._slice import slice_shape as slice
from jaxops._strided_slice import strided_slice_shape as strided_slice

__all__ = [
  "gather",
  "gather_elements",
  "gather_nd",
  "scatter_elements_update",
  "scatter_nd_update",
  "slice",
  "strided_slice",
]
