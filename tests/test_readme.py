"""The README stays true as operators and examples are added: every public
operator has a row in its API table and in its export table, its opening
names every spec the package implements, and its list of examples names
every script in `examples/`. And no file of the project cites an issue
tracker (its history is in the commit messages)."""

from __future__ import annotations

import re

import pytest

import jaxops
from tests.support import processes

pytestmark = pytest.mark.jax_modes(None)

README = (processes.REPO_ROOT / "README.md").read_text()
OPERATORS = sorted(set(jaxops.__all__) - {"shapes"})


def _section(heading: str) -> str:
  """The README's text from the line `heading` to the next `## ` heading."""
  start = README.index(f"\n{heading}\n")
  end = README.find("\n## ", start + 1)
  return README[start : end if end >= 0 else None]


def _first_cells(section: str) -> list[str]:
  """The first cell of every table row of `section`."""
  return [
    line.split("|")[1].strip()
    for line in section.splitlines()
    if line.startswith("| ")
  ]


def test_api_table_has_every_operator():
  cells = _first_cells(_section("## API"))
  missing = [
    op
    for op in OPERATORS
    if not any(c.startswith(f"`jaxops.{op}(") for c in cells)
  ]
  assert not missing, f"README's API table lacks {missing}"


def test_export_table_has_every_operator():
  cells = _first_cells(_section("## Deploying to ONNX Runtime and OpenVINO"))
  missing = [op for op in OPERATORS if f"`{op}`" not in cells]
  assert not missing, f"README's export table lacks {missing}"


def test_opening_names_every_spec():
  # The specs as the package docstring names them ("ScatterNDUpdate-3/15").
  specs = re.findall(r"[A-Z][A-Za-z]+-\d+(?:/\d+)*", jaxops.__doc__ or "")
  assert len(specs) >= len(OPERATORS), specs
  opening = README.split("\n## ")[0]
  missing = [s for s in specs if f"**{s}**" not in opening]
  assert not missing, f"README's opening lacks {missing}"


def test_examples_list_names_every_example():
  listed = next(
    line
    for line in README.split("\n* ")
    if line.startswith("[examples/](examples/)")
  )
  named = set(re.findall(r"`(\w+\.py)`", listed))
  scripts = {p.name for p in (processes.REPO_ROOT / "examples").glob("*.py")}
  assert named == scripts, (
    f"missing from README: {sorted(scripts - named)}; "
    f"not in examples/: {sorted(named - scripts)}"
  )


_TRACKER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
_TEXT = ("*.py", "*.md", "*.toml", "*.txt", "*.cfg", "*.yml", "*.yaml")


def _project_files():
  root = processes.REPO_ROOT
  files = [p for pattern in _TEXT for p in root.glob(pattern)]
  for folder in ("jaxops", "tests", "docs", "bench", "examples", ".ci"):
    files += [p for pattern in _TEXT for p in (root / folder).rglob(pattern)]
  return sorted(set(files))


def test_no_issue_tracker_references():
  found = [
    f"{p.relative_to(processes.REPO_ROOT)}:{n}: {line.strip()}"
    for p in _project_files()
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
    if _TRACKER.search(line)
  ]
  assert not found, "\n".join(found)
