"""jaxops: differentiable JAX operators that reproduce OpenVINO/ONNX exactly.

Gather-8, GatherND-8, GatherElements-11/13, ScatterNDUpdate-3/15,
ScatterElementsUpdate-12, Slice-8 and StridedSlice-1 as jittable, vmappable
functions with forward- and reverse-mode derivatives. Shape rules are in
`jaxops.shapes`. Semantics, decisions and errata are in docs/semantics.md, the
design in docs/design.md.
"""

from jaxops import shapes
from jaxops._gather import gather
from jaxops._gather_elements import gather_elements
from jaxops._gather_nd import gather_nd
from jaxops._scatter_elements_update import scatter_elements_update
from jaxops._scatter_nd_update import scatter_nd_update
from jaxops._slice import slice
from jaxops._strided_slice import strided_slice

__version__ = "0.1.0"

__all__ = [
  "gather",
  "gather_elements",
  "gather_nd",
  "scatter_elements_update",
  "scatter_nd_update",
  "shapes",
  "slice",
  "strided_slice",
]
