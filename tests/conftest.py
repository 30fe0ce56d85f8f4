"""Test-wide JAX configuration: both index widths, strict promotion.

Every test runs twice, once in JAX's default 32-bit mode (`x32`) and once
with `jax_enable_x64` (`x64`), as a first-class parameter of the test id
(`test_foo[...-x32]`). A test that is only meaningful in one mode says so with
`@pytest.mark.jax_modes("x64")` (float64 gradient checks, int64 limits) or
`@pytest.mark.jax_modes("x32")`; a test that runs its code in a subprocess
with its own configuration uses `@pytest.mark.jax_modes(None)` and runs once.

Rank and dtype promotion are strict for the whole suite (what equinox- and
flax-style code bases set), so an implicit broadcast or promotion inside jaxops
fails a test; tests that check permissive user configurations switch back
locally with `jax.numpy_rank_promotion` / `jax.numpy_dtype_promotion`.
Doctests run once, in the default 32-bit mode.

Two runs make the suite (docs/testing.md#two-runs). The README's command,
`pytest -n 2`, runs every test but the rows marked `exhaustive`: those add
sizes, modes and variants to a case whose code another row already runs
(`exhaustive(default=k)`: all but 1 case in k of a table). `pytest -n 2
--exhaustive` runs exactly those rows; `.ci/run` runs both.
"""

from __future__ import annotations

import collections
import gc
import zlib

import chex
import hypothesis
import jax
import pytest

from jaxops import _order
from tests.support import modes
from tests.support.scatter_order import ORDERS

MODES = ("x32", "x64")

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

# 8 CPU devices for tests/test_sharding.py. XLA creates them only if asked
# before JAX's CPU backend starts, so here, before any test runs; the default
# device stays device 0. (chex asks through XLA_FLAGS, which subprocesses
# inherit.)
chex.set_n_cpu_devices(8)

# The x64 mode is switched per test by the autouse fixture below, which is
# function-scoped by design: it holds no state an example could leak.
hypothesis.settings.register_profile(
  "jaxops",
  suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
hypothesis.settings.load_profile("jaxops")


def pytest_addoption(parser):
  parser.addoption(
    "--exhaustive",
    action="store_true",
    help="run only the rows marked `exhaustive`, which the default run "
    "leaves out (.ci/run runs both)",
  )


def pytest_configure(config):
  config.addinivalue_line(
    "markers",
    "jax_modes(*modes): the x64 modes a test runs in ('x32', "
    "'x64'); jax_modes(None) runs it once without switching",
  )
  config.addinivalue_line(
    "markers",
    "lowest_versions: the fast subset .ci/run also runs with every "
    "dependency at its lowest declared version",
  )
  config.addinivalue_line(
    "markers",
    "exhaustive(default=None): rows that add sizes, modes or variants to "
    "code other rows run: only `pytest --exhaustive` runs them; with "
    "default=k, the default run keeps 1 case in k of the table (a fixed "
    "hash picks it) and the cases named in keep=(ids), and --exhaustive "
    "runs the others",
  )
  config.addinivalue_line(
    "markers",
    "covering_modes: a covering design over the x64 modes: each case of "
    "the test's table runs in one mode, the cases alternating",
  )
  config.addinivalue_line(
    "markers",
    "scatter_orders(one=False): each case also runs the constructed path "
    "of scatters with repeated targets on CPU (the `scatter_order` "
    "fixture): the two x64 modes of a case take the two paths, and a case "
    "that runs in one mode runs both (or, with one=True, the one its hash "
    "picks)",
  )


def pytest_generate_tests(metafunc):
  marker = metafunc.definition.get_closest_marker("jax_modes")
  modes = MODES if marker is None else marker.args
  if modes == (None,):
    return
  unknown = set(modes) - set(MODES)
  if unknown:
    raise ValueError(f"jax_modes: unknown modes {sorted(unknown)}")
  metafunc.parametrize("jax_mode", modes, indirect=True)
  if metafunc.definition.get_closest_marker("scatter_orders"):
    metafunc.parametrize("scatter_order", ORDERS, indirect=True)


def pytest_collection_modifyitems(config, items):
  # A jax_modes mark on one `pytest.param` narrows that case only; marks on
  # the test function were applied when it was parametrized.
  kept, dropped = [], []
  for item in items:
    marker = item.get_closest_marker("jax_modes")
    mode = _param(item, "jax_mode")
    if marker is not None and mode and mode not in marker.args:
      dropped.append(item)
    else:
      kept.append(item)
  # .ci/run's lowest-versions leg (`-m lowest_versions`) runs its rows in
  # both modes.
  lowest = "lowest_versions" in (config.getoption("markexpr") or "")
  kept, uncovered = _covering(kept, lowest)
  dropped += uncovered
  run = [
    _exhaustive(i, lowest) == config.getoption("--exhaustive") for i in kept
  ]
  dropped += [i for i, r in zip(kept, run) if not r]
  kept = [i for i, r in zip(kept, run) if r]
  if dropped:
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def _param(item, name):
  callspec = getattr(item, "callspec", None)
  return callspec.params.get(name) if callspec else None


def _exhaustive(item, lowest: bool) -> bool:
  """Whether `item` runs with --exhaustive only: marked `exhaustive`, or, with
  `exhaustive(default=k)`, a case outside the 1 in k the default run takes
  (picked by a fixed hash of the case, the same in every process) and not
  one of its `keep` ids (cases that alone run some code of jaxops). With
  `lowest`, a table's rows marked `lowest_versions` all run: the
  lowest-versions leg takes every operator's row whatever the default run's
  share."""
  marker = item.get_closest_marker("exhaustive")
  if marker is None:
    return False
  share = marker.kwargs.get("default")
  if share is None:
    return True
  if lowest and item.get_closest_marker("lowest_versions"):
    return False
  case = _case_id(item) if hasattr(item, "callspec") else item.name
  parts = set(case.split("-"))
  if any(set(k.split("-")) <= parts for k in marker.kwargs.get("keep", ())):
    return False
  return zlib.crc32(case.encode()) // 4 % share != 0


def _case_id(item):
  """The item's name less its mode and order: the same in every process
  (a parameter's str may hold an address, and xdist's workers must all
  pick the same design)."""
  ids = item.callspec.id.split("-")
  return "-".join(
    [item.originalname] + [i for i in ids if i not in ("x32", "x64", *ORDERS)]
  )


def _covering(items, lowest):
  """(kept, dropped): the covering designs of `covering_modes` and
  `scatter_orders`. A case is the test and its parameters but the mode and
  the order; a fixed hash of it picks its mode (covering_modes), so that
  across a table both modes run. Every case runs both orders: in its two
  modes, one each (picked by the hash), or both in its one mode (one, the
  hash's, with `scatter_orders(one=True)`). With `lowest`, rows marked
  `lowest_versions` keep both modes: .ci/run's second leg runs them in
  both."""
  cases: dict[tuple, list] = collections.defaultdict(list)
  for item in items:
    if not hasattr(item, "callspec"):  # one run: nothing to cover
      continue
    if item.get_closest_marker("covering_modes") or item.get_closest_marker(
      "scatter_orders"
    ):
      params = item.callspec.params
      case = sorted(
        (k, str(v))
        for k, v in params.items()
        if k not in ("jax_mode", "scatter_order")
      )
      cases[(item.path, item.originalname, tuple(case))].append(item)
  dropped = set()
  for members in cases.values():
    pick = zlib.crc32(_case_id(members[0]).encode())
    modes = sorted({_param(m, "jax_mode") for m in members}, key=str)
    orders = sorted({_param(m, "scatter_order") for m in members}, key=str)
    for member in members:
      mode, order = _param(member, "jax_mode"), _param(member, "scatter_order")
      # The rows .ci/run's lowest-versions leg runs keep both modes there.
      covering_modes = member.get_closest_marker("covering_modes") and not (
        lowest and member.get_closest_marker("lowest_versions")
      )
      keep = not covering_modes or mode == modes[pick % len(modes)]
      orders_marker = member.get_closest_marker("scatter_orders")
      if orders_marker and (
        len(modes) > 1 or orders_marker.kwargs.get("one", False)
      ):
        shift = 0 if covering_modes else modes.index(mode)
        keep = keep and order == orders[(pick // 2 + shift) % len(orders)]
      if not keep:
        dropped.add(id(member))
  return (
    [i for i in items if id(i) not in dropped],
    [i for i in items if id(i) in dropped],
  )


@pytest.fixture(autouse=True)
def jax_mode(request):
  """The x64 mode of this test run: "x32", "x64", or None (not switched)."""
  with modes.x64_mode(getattr(request, "param", None)) as mode:
    yield mode


@pytest.fixture
def scatter_order(request, monkeypatch):
  """The path of scatters with repeated targets this test run takes on CPU:
  "serial" (XLA's scatter, the default) or "constructed" (the path of every
  other platform; docs/semantics.md#repeat-order)."""
  order = getattr(request, "param", "serial")
  if order == "constructed":
    monkeypatch.setenv(_order.ENV_VAR, "constructed")
  else:
    monkeypatch.delenv(_order.ENV_VAR, raising=False)
  return order


@pytest.fixture
def constructed(monkeypatch):
  """Scatters with repeated targets take the constructed path on CPU too
  (`JAXOPS_SCATTER_ORDER=constructed`, docs/semantics.md#repeat-order): for
  tests of that path's own machinery (winner searches, the sorted fold). The
  switch is read when tracing: such tests trace functions of their own."""
  monkeypatch.setenv(_order.ENV_VAR, "constructed")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
  """Frees every compiled executable after each test module.

  Each XLA:CPU executable holds a few memory maps of JIT code for as long as
  JAX's caches keep it. A pytest-xdist worker that runs half the suite would
  keep some 20,000 of them, pass Linux's `vm.max_map_count` (65530) and die
  of a segmentation fault in its next compilation.
  """
  yield
  jax.clear_caches()
  gc.collect()
