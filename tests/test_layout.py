"""The package's layout: one operator per module, and no import circles.

docs/design.md#adding-an-operator: shared machinery imports no operator, and
no module in `jaxops/` imports another that imports it back.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import jaxops

pytestmark = pytest.mark.lowest_versions

_ROOT = pathlib.Path(jaxops.__file__).parent


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(_ROOT.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
  """Every jaxops module and the jaxops modules it imports (at any depth of
  its code, late imports included; a package's `__init__` counts where a
  name is imported from it, not from its submodules)."""
  modules = {_module_name(p): p for p in _ROOT.rglob("*.py")}
  graph: dict[str, set[str]] = {}
  for name, path in modules.items():
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        found.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module:
        # `from jaxops import _common` imports the submodule; the package
        # itself counts only for names defined in it.
        for alias in node.names:
          submodule = f"{node.module}.{alias.name}"
          found.add(submodule if submodule in modules else node.module)
    graph[name] = {m for m in found if m in modules and m != name}
  return graph


_GRAPH = _imports()
_OPERATORS = {
  "jaxops._gather",
  "jaxops._gather_elements",
  "jaxops._gather_nd",
  "jaxops._scatter_elements_update",
  "jaxops._scatter_nd_update",
  "jaxops._slice",
  "jaxops._strided_slice",
}
# An operator's ONNX lowering, jaxops/onnx/_<operator>.py, imports it.
_LOWERINGS = {op.replace("jaxops.", "jaxops.onnx.") for op in _OPERATORS}
_ENTRY_POINTS = {"jaxops", "jaxops.shapes"}


@pytest.mark.jax_modes(None)
@pytest.mark.parametrize("module", sorted(_GRAPH))
def test_no_import_circle(module):
  seen, stack = set(), [(module, (module,))]
  while stack:
    name, path = stack.pop()
    for imported in _GRAPH[name]:
      assert imported != module, f"import circle: {' -> '.join(path)}"
      if imported not in seen:
        seen.add(imported)
        stack.append((imported, path + (imported,)))


@pytest.mark.jax_modes(None)
@pytest.mark.parametrize(
  "module", sorted(set(_GRAPH) - _OPERATORS - _LOWERINGS - _ENTRY_POINTS)
)
def test_shared_modules_import_no_operator(module):
  assert not _GRAPH[module] & _OPERATORS


@pytest.mark.jax_modes(None)
def test_every_operator_has_its_lowering():
  assert _LOWERINGS <= set(_GRAPH)
  for op in _OPERATORS:
    assert _GRAPH[op.replace("jaxops.", "jaxops.onnx.")] >= {op}
