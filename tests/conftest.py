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
"""

from __future__ import annotations

import gc

import chex
import hypothesis
import jax
import pytest

from jaxops import _order
from tests.support import modes

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


def pytest_generate_tests(metafunc):
  marker = metafunc.definition.get_closest_marker("jax_modes")
  modes = MODES if marker is None else marker.args
  if modes == (None,):
    return
  unknown = set(modes) - set(MODES)
  if unknown:
    raise ValueError(f"jax_modes: unknown modes {sorted(unknown)}")
  metafunc.parametrize("jax_mode", modes, indirect=True)


def pytest_collection_modifyitems(config, items):
  # A jax_modes mark on one `pytest.param` narrows that case only; marks on
  # the test function were applied when it was parametrized.
  kept, dropped = [], []
  for item in items:
    marker = item.get_closest_marker("jax_modes")
    mode = getattr(item, "callspec", None) and item.callspec.params.get(
      "jax_mode"
    )
    if marker is not None and mode and mode not in marker.args:
      dropped.append(item)
    else:
      kept.append(item)
  if dropped:
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture(autouse=True)
def jax_mode(request):
  """The x64 mode of this test run: "x32", "x64", or None (not switched)."""
  with modes.x64_mode(getattr(request, "param", None)) as mode:
    yield mode


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
