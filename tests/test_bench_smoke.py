"""The benchmark runs end to end at tiny sizes and writes what it promises.

Runs `python -m bench --smoke` in a subprocess once per x64 mode (JAX's
default 32-bit mode and x64, both with this suite's strict rank and dtype
promotion), on a few cases that cover every operator, tier and kind of
variant (vmap, duplicate indices, a sweep), then checks the table, the JSON
(environment, the bit-exactness comparisons it ran, the bar verdicts) and
the plots. PyTorch is optional: the 32-bit run hides it (as if it were not
installed), and its variants must be skipped with a note while everything
else passes; the x64 run uses it where it is installed. Under pytest-xdist
each mode runs once per session. The allocator logic and the module layout
are checked without a subprocess.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from bench import ops
from tests.support import processes

# The bench is not the library: its smoke run is part of --exhaustive.
pytestmark = [pytest.mark.jax_modes(None), pytest.mark.exhaustive]

ROOT = processes.REPO_ROOT
TIMEOUT_S = 240
OPS = ops.NAMES
# ScatterElementsUpdate has reduction cases only, no vmap tier.
VMAP_OPS = set(OPS) - {"scatter_elements_update"}
CASES = (
  "gather_nd/ir_b2,gather_nd/vmap_both,gather_nd/sweep*,"
  "gather_elements/axis0,gather_elements/vmap_indices,"
  "scatter_nd_update/large,scatter_nd_update/large_dup10,"
  "scatter_nd_update/vmap_data,strided_slice/ir_shrink,"
  "strided_slice/vmap_data,gather/ir_b1,gather/vmap_both,"
  "slice/large_negative_step,slice/vmap_data,scatter_nd_update/graph_sum,"
  "scatter_elements_update/segment_mean,scatter_elements_update/graph_max"
)


# `python -m bench` with `import torch` failing, as without PyTorch installed.
_WITHOUT_TORCH = (
  "import sys; sys.modules['torch'] = None; "
  "from bench.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _run_bench(out: pathlib.Path, x64: bool) -> dict[str, object]:
  env = processes.subprocess_env(
    JAX_PLATFORMS="cpu",
    JAX_ENABLE_X64="1" if x64 else "0",
    JAX_NUMPY_RANK_PROMOTION="raise",
    JAX_NUMPY_DTYPE_PROMOTION="strict",
  )
  env.pop("XLA_FLAGS", None)
  command = ["-m", "bench"] if x64 else ["-c", _WITHOUT_TORCH]
  proc = subprocess.run(
    [sys.executable, *command, "--smoke", "--out", str(out), "--cases", CASES],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    check=False,
  )
  return {
    "returncode": proc.returncode,
    "stdout": proc.stdout,
    "stderr": proc.stderr[-4000:],
  }


@pytest.fixture(scope="module", params=["x32", "x64"])
def smoke_run(request, tmp_path_factory):
  """(output folder, stdout, results dict) of one smoke run per x64 mode."""
  mode = request.param
  try:
    worker_id = request.getfixturevalue("worker_id")
  except pytest.FixtureLookupError:  # pytest-xdist not loaded
    worker_id = "master"
  shared = processes.shared_dir(tmp_path_factory, worker_id, "bench")
  out = shared / f"bench_{mode}"
  path = processes.produce_once(
    shared,
    f"bench_{mode}.json",
    lambda partial: partial.write_text(
      json.dumps(_run_bench(out, mode == "x64"))
    ),
    TIMEOUT_S,
  )
  run = json.loads(path.read_text())
  assert run["returncode"] == 0, run["stderr"]
  with open(out / "results.json") as f:
    return out, run["stdout"], json.load(f), mode


def test_outputs_exist(smoke_run):
  out, stdout, _, _ = smoke_run
  names = set(os.listdir(out))
  assert {"results.json", "results.md"} <= names
  for op in OPS:
    assert f"{op}_bars.png" in names
    assert os.path.getsize(out / f"{op}_bars.png") > 1000
  assert "gather_nd_sweep.png" in names
  for section in (
    "## Forward",
    "## Forward + backward",
    "## vmap",
    "## Cost of the safe defaults",
    "## Sweep gather_nd",
    "## Bars (allocator: system)",
    "## All variants",
  ):
    assert section in stdout, section


def test_torch_optional(smoke_run):
  _, _, results, mode = smoke_run
  if mode == "x32":
    assert results["env"]["peers"]["torch"] == "not installed"
  elif importlib.util.find_spec("torch") is not None:
    assert _torch_ran(results)


def test_environment_recorded(smoke_run):
  _, _, results, mode = smoke_run
  env = results["env"]
  for key in (
    "jax",
    "jaxlib",
    "backend",
    "device_kind",
    "cpu_count",
    "thread_env",
    "peers",
    "loadavg_start",
    "allocator",
  ):
    assert key in env, key
  assert env["backend"] == "cpu"
  assert env["x64"] == (mode == "x64")
  assert env["allocator"]["mode"] == "system"
  assert env["allocator"]["loaded"] == []
  assert results["bandwidth"]["host_copyto_Bps"] > 0


def _torch_ran(results) -> bool:
  return results["env"]["peers"]["torch"] != "not installed"


def test_every_case_checked_and_timed(smoke_run):
  _, _, results, _ = smoke_run
  assert results["bit_exact_failure"] is None
  cases = {c["key"]: c for c in results["cases"]}
  assert {c["op"] for c in cases.values()} == set(OPS)
  assert {c["tier"] for c in cases.values()} == {"ir", "large", "sweep", "vmap"}
  for key, case in cases.items():
    variants = case["variants"]
    assert variants, key
    for entry in variants.values():
      assert entry["iqm_s"] > 0 and entry["reps"] >= 1
    # Every variant but the first of each group was compared bit for bit,
    # the one that may race marked instead (test_scatter_reduction_cases).
    groups = {e["group"] for e in variants.values()}
    checked = {c["variant"] for c in case["checks"]}
    marked = {name for name, e in variants.items() if "wrong" in e}
    assert marked <= {"onnxruntime.threads"}, key
    assert checked == set(variants) - {"jaxops", "jaxops.grad"} - marked, key
    assert len(groups) == len(variants) - len(checked) - len(marked), key
    if case["tier"] in ("ir", "large") and case["unique"]:
      assert {
        "jaxops",
        "plain",
        "openvino",
        "onnxruntime",
        "jaxops.grad",
        "plain.grad",
      } <= set(variants), key
      torch = {"torch", "torch.grad"}
      if _torch_ran(results):
        assert torch <= set(variants), key
      else:
        assert all("not installed" in case["skipped"][t] for t in torch), key
    if case["op"].startswith("gather") and case["tier"] != "sweep":
      assert "jaxops_clip" in variants, key
  scatter = cases["scatter_nd_update/large"]
  for name in ("jaxops.donated", "jaxops_unique.donated"):
    assert scatter["variants"][name]["donation_used"], name
  if _torch_ran(results):
    assert scatter["variants"]["torch.inplace"]["donated"]


def test_scatter_reduction_cases(smoke_run):
  """The reduction cases time jaxops, plain JAX and both runtimes (one
  thread) after the bit-exactness gate, and onnxruntime on the run's threads
  with its output marked; max has no plain fwd+bwd (plain autodiff splits
  ties). Their own peer bar is evaluated."""
  _, stdout, results, _ = smoke_run
  cases = {c["key"]: c for c in results["cases"]}
  expected = {
    "scatter_nd_update/graph_sum": {"plain_reduce", "plain_reduce.grad"},
    "scatter_elements_update/segment_mean": {"plain", "plain.grad"},
    "scatter_elements_update/graph_max": {"plain", "onnxruntime"},
  }
  for key, variants in expected.items():
    case = cases[key]
    assert case["peer_threads"] == 1, key
    assert {"jaxops", "jaxops.grad", "openvino"} | variants <= set(
      case["variants"]
    ), key
  assert (
    "plain.grad" not in cases["scatter_elements_update/graph_max"]["variants"]
  )
  for key in (
    "scatter_nd_update/graph_sum",
    "scatter_elements_update/graph_max",
  ):
    threaded = cases[key]["variants"]["onnxruntime.threads"]
    assert threaded["threads"] == results["env"]["peer_threads"], key
    assert "wrong" in threaded and threaded["peer"], key
    assert "onnxruntime.threads (" in stdout, key
  mean = cases["scatter_elements_update/segment_mean"]
  assert "no mean" in mean["skipped"]["onnxruntime.threads"]
  if _torch_ran(results):
    # PyTorch's amax splits tied gradients: compared where nothing ties,
    # and marked.
    torch_grad = cases["scatter_elements_update/graph_max"]["variants"][
      "torch.grad"
    ]
    assert torch_grad["convention"]["left_out"] > 0, torch_grad
    assert "its convention: the gradient of a max split evenly" in stdout
    assert "† PyTorch's own convention: the gradient of a max split" in stdout
    mean = cases["scatter_elements_update/segment_mean"]["variants"]
    assert mean["torch.grad"]["convention"]["left_out"] == 1
  assert results["bit_exact_failure"] is None
  reduction_bars = [
    v for v in results["bars"] if v["bar"].startswith("reduction forward")
  ]
  assert {v["op"] for v in reduction_bars} == {
    "scatter_nd_update",
    "scatter_elements_update",
  }
  for v in reduction_bars:
    assert v["met"] is not None and v["checks"], v
    assert all(c["case"] in cases for c in v["checks"])


def test_peer_bars_split_by_peer_threads():
  """The general peer bars leave out the one-thread cases; the reductions'
  bar reads only those, and a peer whose output was wrong on one of them is
  no peer on any: it races, and was right elsewhere by luck."""
  from bench import bars

  def case(name, peer_threads, threaded_wrong):
    variants = {
      "jaxops": {"iqm_s": 2.0, "donated": False},
      "onnxruntime": {"iqm_s": 4.0, "peer": True},
      "onnxruntime.threads": {
        "iqm_s": 1.0,
        "peer": True,
        "threads": 2,
        "wrong": "output 0: 3 of 8 elements differ" if threaded_wrong else None,
      },
    }
    return {
      "key": f"op/{name}",
      "name": name,
      "tier": "large",
      "peer_threads": peer_threads,
      "variants": variants,
    }

  cases = [
    case("general", None, False),
    case("racing", 1, True),
    case("serial", 1, False),
  ]
  assert bars.fastest_peer(cases[1]) == ("onnxruntime", 4.0)
  assert bars.fastest_peer(cases[2]) == ("onnxruntime.threads", 1.0)
  general = bars.VsPeers("general").checks(cases)
  assert [c.case for c in general] == ["op/general"]
  reductions = bars.reduction_peer_bar(("rac*", "serial")).checks(cases)
  assert [(c.case, c.value, c.met) for c in reductions] == [
    ("op/racing", 0.5, True),
    ("op/serial", 0.5, True),
  ]
  assert "onnxruntime.threads is no peer: wrong on racing" in (
    reductions[1].detail
  )
  alone = bars.reduction_peer_bar(("serial",)).checks(cases)
  assert [(c.case, c.value, c.met) for c in alone] == [
    ("op/serial", 2.0, False)
  ]


def test_order_probe_catches_a_sum_in_another_order():
  """On small integers every order of a sum has the same bits; the probe
  redraws the floats (not the indices) so that a reordered sum shows."""
  from bench import cli, harness

  rng = np.random.default_rng(0)
  indices = np.zeros((64, 1), np.int32)
  inputs = [np.zeros(1, np.float32), indices, np.ones(64, np.float32)]
  probe = harness.order_probe(rng, inputs)
  assert probe[1] is indices
  assert all(p.dtype == a.dtype for p, a in zip(probe, inputs))
  assert len(np.unique(probe[2])) == 64

  def runner(reverse):
    def call(a):
      updates = a[2][::-1] if reverse else a[2]
      out = a[0].copy()
      for u in updates:
        out[0] += u
      return out

    return harness.Runner(None, call, lambda out: [out], setup=lambda: probe)

  def variant(reverse):
    return harness.Variant(
      "onnxruntime.threads",
      "fwd",
      lambda: None,
      may_differ=True,
      order_check=lambda p: (runner(reverse), runner(False)),
    )

  assert cli._order_difference(variant(False), inputs, rng) is None
  difference = cli._order_difference(variant(True), inputs, rng)
  assert difference.startswith(
    "on random floats, where the order of a sum shows: output 0: 1 of 1"
  ), difference


def test_tie_variants_get_their_own_minimum_of_rounds():
  """The variants an "at or ahead" ratio bar compares, on the cases it
  applies to, are the ones `--tie-reps` gives more rounds; `measure` holds
  each runner to its own minimum, past the budget."""
  from bench import bars, harness
  from bench.ops import gather, scatter_nd_update

  large = {"name": "batch_dims_1", "tier": "large", "unique": True}
  tied = frozenset().union(*(b.tie_variants(large) for b in gather.BARS))
  assert tied == {"jaxops.grad", "plain.grad"}
  # A bar with room takes no ties; a reduction bar skips other cases.
  assert not bars.FILL_VS_CLIP.tie_variants(large)
  other = {"name": "large", "tier": "large", "unique": True}
  assert "plain_reduce.grad" not in frozenset().union(
    *(b.tie_variants(other) for b in scatter_nd_update.BARS)
  )
  ir_sum = {"name": "ir_sum", "tier": "ir", "unique": False}
  assert {"jaxops.grad", "plain_reduce.grad"} <= frozenset().union(
    *(b.tie_variants(ir_sum) for b in scatter_nd_update.BARS)
  )

  runner = lambda: harness.Runner(None, lambda _: np.zeros(()), list)
  timings = harness.measure(
    {"tied": runner(), "other": runner()},
    warmup=0,
    reps=300,
    budget_s=0.0,
    min_reps={"tied": 40, "other": 3},
  )
  assert (timings["tied"].reps, timings["other"].reps) == (40, 3)


def test_paired_ratio_bounds_the_median_by_order_statistics():
  """Round-by-round ratios; the 95% interval of their median from order
  statistics: the extremes at 6 rounds, the 2nd from each end at 10."""
  from bench import harness

  ones = [1.0] * 10
  assert harness.paired_ratio(ones[:5], ones[:5]) is None
  six = harness.paired_ratio([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0] * 6)
  assert six == {"median": 3.5, "lo": 1.0, "hi": 6.0, "n": 6}
  # Rounds pair by position, the longer list's extra rounds left out.
  ten = harness.paired_ratio([float(i) for i in range(1, 11)], ones + [9.0])
  assert ten == {"median": 5.5, "lo": 2.0, "hi": 9.0, "n": 10}


def test_each_jaxops_variant_is_paired_with_the_others_of_its_group():
  from bench import cli, harness

  def timed(name, group, rounds):
    variant = harness.Variant(name, group, lambda: None)
    return (variant, None), harness.Timing(1.0, 1.0, 1.0, len(rounds), rounds)

  table = {
    "jaxops": timed("jaxops", "fwd", [2.0] * 6),
    "jaxops_clip": timed("jaxops_clip", "fwd", [1.0] * 6),
    "plain": timed("plain", "fwd", [1.0] * 6),
    "openvino": timed("openvino", "fwd", [4.0] * 5),  # too few rounds
    "jaxops.grad": timed("jaxops.grad", "fwdbwd", [3.0] * 6),
    "plain.grad": timed("plain.grad", "fwdbwd", [6.0] * 6),
  }
  paired = cli._paired(
    {k: v[0] for k, v in table.items()}, {k: v[1] for k, v in table.items()}
  )
  assert {k: v["median"] for k, v in paired.items()} == {
    "jaxops / plain": 2.0,
    "jaxops_clip / plain": 1.0,
    "jaxops.grad / plain.grad": 0.5,
  }


def test_at_or_ahead_bars_take_a_tie_only_within_resolution():
  """A call measured behind its reference meets an "at or ahead" bar only
  when the paired interval reaches 1.0 and stays within 1.05; a bar with
  room (at most 1.1x) takes no ties; the verdict names the ties."""
  from bench import bars

  def case(name, lo, hi):
    return {
      "key": f"op/{name}",
      "name": name,
      "tier": "large",
      "variants": {
        "jaxops.grad": {"iqm_s": 1.03},
        "plain.grad": {"iqm_s": 1.0},
      },
      "paired": {
        "jaxops.grad / plain.grad": {
          "median": 1.02,
          "lo": lo,
          "hi": hi,
          "n": 40,
        }
      },
    }

  cases = [
    case("tie", 0.99, 1.04),
    case("slower", 1.01, 1.04),
    case("unresolved", 0.97, 1.08),
  ]
  checks = bars.GRAD_VS_PLAIN.checks(cases)
  assert [(c.case, c.met, c.tie) for c in checks] == [
    ("op/tie", True, True),
    ("op/slower", False, False),
    ("op/unresolved", False, False),
  ]
  assert "a tie: round by round 1.020x, 95% interval 0.990-1.040x" in (
    checks[0].detail
  )
  verdict = bars.GRAD_VS_PLAIN.evaluate("op", cases[:1])
  assert verdict["met"], verdict
  assert "ties on op/tie jaxops.grad (1.03x)" in verdict["summary"]
  room = bars.Ratio("room", (("jaxops.grad", "plain.grad"),), at_most=1.01)
  assert not room.checks(cases[:1])[0].met


def test_first_difference_names_the_output():
  from bench import harness

  same = [np.array([1.0, 2.0], np.float32)]
  assert harness.first_difference(same, same) is None
  other = [np.array([1.0, 3.0], np.float32)]
  assert harness.first_difference(other, same) == (
    "output 0: 1 of 2 elements differ, first at (1,): "
    "np.float32(3.0) vs np.float32(2.0)"
  )


def test_vmap_cases(smoke_run):
  _, _, results, _ = smoke_run
  vmap = [c for c in results["cases"] if c["tier"] == "vmap"]
  assert {c["op"] for c in vmap} == VMAP_OPS
  for case in vmap:
    assert {"jaxops", "batched", "loop", "jaxops.grad", "batched.grad"} <= set(
      case["variants"]
    ), case["key"]
    assert case["batch"] > 1 and 0 in case["in_axes"]
  data = next(c for c in vmap if c["key"] == "scatter_nd_update/vmap_data")
  assert data["in_axes"] == [0, None, None]
  assert data["variants"]["batched.donated"]["donation_used"]


def test_duplicate_indices_case(smoke_run):
  _, _, results, _ = smoke_run
  case = next(
    c for c in results["cases"] if c["key"] == "scatter_nd_update/large_dup10"
  )
  assert not case["unique"] and case["peer_threads"] == 1
  assert {
    "jaxops",
    "jaxops.donated",
    "openvino",
    "onnxruntime",
    "jaxops.grad",
  } <= set(case["variants"])
  for name in ("jaxops_unique", "plain", "torch", "torch.inplace"):
    assert name not in case["variants"] and case["skipped"][name], name


def test_bars_evaluated(smoke_run):
  _, stdout, results, _ = smoke_run
  verdicts = results["bars"]
  assert {v["op"] for v in verdicts} == set(OPS)
  for v in verdicts:
    assert v["met"] in (True, False, None) and v["summary"], v
    assert v["allocator"] == "system"
    assert "issue" not in v["bar"].lower()
    if v["met"] is not None:
      assert v["checks"], v
  names = {(v["op"], v["bar"]) for v in verdicts}
  assert any(op == "scatter_nd_update" and "1.4x" in bar for op, bar in names)
  assert any(op == "gather_nd" and "mode='clip'" in bar for op, bar in names)
  assert all(
    v["met"] is not None
    for v in verdicts
    if v["bar"].startswith(("compile", "vmap"))
  )


def _toy_case(name: str):
  """A case with no inputs, for the bit-exactness gate alone."""
  from bench import harness

  return harness.Case(
    op="toy",
    name=name,
    tier="ir",
    shapes="",
    make_inputs=None,
    forms={},
    diff_argnums=(),
    traffic=harness.Traffic(0),
  )


def test_bit_exact_gate_fails_loudly():
  """A formulation that disagrees stops the bench before timing."""
  from bench import harness

  case = _toy_case("mismatch")
  outputs = {
    "jaxops": ("fwd", [np.array([1.0, 2.0], np.float32)]),
    "plain": ("fwd", [np.array([1.0, 3.0], np.float32)]),
  }
  with pytest.raises(harness.BitExactError, match="1 of 2 elements differ"):
    harness.check_bit_exact(case, outputs)
  outputs["plain"] = ("fwd", [np.array([1.0, 2.0], np.float32)])
  assert harness.check_bit_exact(case, outputs)[0]["result"] == "bit-exact"


def test_peer_convention_compared_outside_ties():
  """A peer gradient that splits a max's gradient among tied elements
  (PyTorch) is compared with jaxops' where nothing ties; a difference
  there still stops the run."""
  from bench import harness

  case = _toy_case("max")
  # Slot 0: data 1, updates 3 and 3 (a tie); slot 1: data 5, update 2.
  data = np.array([1.0, 5.0], np.float32)
  targets = np.array([0, 0, 1])
  updates = np.array([3.0, 3.0, 2.0], np.float32)
  out = np.array([3.0, 5.0], np.float32)
  left_out = harness.tied_extrema(data, targets, updates, out)
  assert left_out[0] is None
  np.testing.assert_array_equal(left_out[1], [True, False])
  np.testing.assert_array_equal(left_out[2], [True, True, False])
  loss = np.float32(8.0)
  jaxops_grads = [loss, np.array([0, 1], np.float32), np.array([1, 0, 0], "f4")]
  split = [loss, np.array([0, 1], np.float32), np.array([0.5, 0.5, 0], "f4")]
  checks = harness.compare_outputs(
    case, "torch.grad", split, "jaxops.grad", jaxops_grads, left_out
  )
  assert [c["result"] for c in checks] == [
    "bit-exact",
    "bit-exact on 1 of 2",
    "bit-exact on 1 of 3",
  ]
  assert harness.left_out_differences(split, jaxops_grads, left_out) == {
    "left_out": 3,
    "differ": 2,
  }
  wrong = [loss, np.array([0, 2], np.float32), split[2]]
  with pytest.raises(harness.BitExactError, match="first at \\(1,\\)"):
    harness.compare_outputs(
      case, "torch.grad", wrong, "jaxops.grad", jaxops_grads, left_out
    )


def test_progress_in_a_log_is_one_line_per_case():
  """Not a terminal (`python -m bench > log 2>&1`): no tqdm bar."""
  from bench import cli

  log = io.StringIO()
  with cli.progress_bar(2, log) as progress:
    for key in ("op/a", "op/b"):
      progress.set_postfix_str(f"{key}: timing 3 variants")
      progress.update()
  assert "\r" not in log.getvalue()
  lines = log.getvalue().splitlines()
  assert len(lines) == 2
  assert lines[1].startswith("bench: 2/2 cases, ")
  assert lines[1].endswith("s: op/b: timing 3 variants")


def test_allocator_restart_environment(tmp_path, monkeypatch):
  from bench import allocator

  clean = {"PATH": "/usr/bin"}
  assert allocator.restart_env("system", clean) is None
  # A preloaded allocator is removed for `system`, then the run restarts.
  env = allocator.restart_env(
    "system", {**clean, "LD_PRELOAD": "/x/libjemalloc.so.2 /x/libfoo.so"}
  )
  assert env["LD_PRELOAD"] == "/x/libfoo.so"
  assert env[allocator.MARKER] == "system"
  assert allocator.restart_env("system", env) is None
  env = allocator.restart_env("hugetlb", clean)
  assert env["GLIBC_TUNABLES"] == allocator.HUGETLB
  env = allocator.restart_env("glibc-heap", clean)
  assert env == {
    **clean,
    **allocator.GLIBC_HEAP,
    allocator.MARKER: "glibc-heap",
  }
  # `system` is glibc as it is: the heap settings are removed.
  assert allocator.restart_env("system", env) == {
    **clean,
    allocator.MARKER: "system",
  }
  library = tmp_path / "libjemalloc.so.2"
  library.write_bytes(b"")
  monkeypatch.setenv("BENCH_JEMALLOC", str(library))
  env = allocator.restart_env("jemalloc", clean)
  assert env["LD_PRELOAD"] == str(library)
  assert env["MALLOC_CONF"] == allocator.JEMALLOC_CONF
  assert env["TBB_ENABLE_SANITIZERS"] == "1"  # OpenVINO under a preload
  assert allocator.restart_env("jemalloc", env) is None
  monkeypatch.setenv("BENCH_TCMALLOC", str(tmp_path / "absent.so"))
  with pytest.raises(SystemExit, match="BENCH_TCMALLOC"):
    allocator.restart_env("tcmalloc", clean)


def test_missing_allocator_says_how_to_install(monkeypatch):
  from bench import allocator

  monkeypatch.delenv("BENCH_TCMALLOC", raising=False)
  monkeypatch.setattr(allocator, "_ld_cache", dict)
  monkeypatch.setattr(allocator, "_SEARCH_DIRS", ())
  with pytest.raises(SystemExit, match="apt-get install libtcmalloc-minimal4"):
    allocator.find_library("tcmalloc")


def _bench_imports(path: pathlib.Path) -> set[str]:
  """The bench modules `path` imports (any level)."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module:
      if node.module == "bench":
        names |= {f"bench.{a.name}" for a in node.names}
      elif node.module.startswith("bench."):
        names.add(node.module)
    elif isinstance(node, ast.Import):
      names |= {a.name for a in node.names if a.name.startswith("bench")}
  return names


def test_bench_modules_form_a_dag():
  """No import cycle; the harness and the bar kinds import no bench module."""
  modules = {}
  for path in (ROOT / "bench").rglob("*.py"):
    rel = path.relative_to(ROOT).with_suffix("")
    name = ".".join(rel.parts).removesuffix(".__init__")
    modules[name] = _bench_imports(path) - {name}
  assert modules["bench.harness"] == set()
  assert modules["bench.bars"] == set()
  state: dict[str, str] = {}

  def visit(name, trail):
    if state.get(name) == "done":
      return
    assert state.get(name) != "open", " -> ".join(trail + [name])
    state[name] = "open"
    for dep in modules.get(name, ()):
      visit(dep, trail + [name])
    state[name] = "done"

  for name in modules:
    visit(name, [])


def test_determinism_report_on_cpu():
  """`python -m bench.determinism` (the run-after-run check taken on a GPU,
  bench/DETERMINISM-gpu-h200.md) at a small size on the CPU: every path
  gives one result over its runs, the serial sums are NumPy's `np.add.at`,
  and the CPU's constructed path is the reference itself."""
  from bench import determinism

  rows = determinism.run(n=4096, dtype="float32", repeats=2, seed=0)
  cases = {row["case"] for row in rows}
  assert {"scatter_nd_update/sum", "scatter_elements_update/mean"} <= cases
  assert {"gather_nd/grad", "gather_elements/grad", "gather/grad"} <= cases
  for row in rows:
    assert row["jaxops_distinct"] == 1, row
    assert row["path"] == "serial", row
    if row["equals_numpy_serial"] is not None:
      assert row["equals_numpy_serial"], row
    if row["plain_equals_jaxops"] is not None:
      # On CPU the plain formulations are XLA's serial scatter too.
      assert row["plain_equals_jaxops"], row
