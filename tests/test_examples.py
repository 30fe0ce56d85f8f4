"""Runs every script in examples/ (small settings) and checks what it prints.

Each example runs once per session in a subprocess (sharded.py must set
XLA_FLAGS before JAX is imported, and a fresh process keeps the others from
inheriting this suite's x64 mode); under pytest-xdist the first worker to need
an example runs it and the others read its saved output. The tests parse the
lines the examples print and check their claims: the loss falls (and does not
beat the Bayes-optimal loss, which would mean the answer leaked into the
input), vmap equals the loop, sharded equals unsharded.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from tests.support import processes

# Each check runs in a subprocess with its own JAX configuration: run once.
# One worker runs every example (each once, its output shared by its tests):
# split between two workers, one would wait for the other's run.
pytestmark = [pytest.mark.jax_modes(None), pytest.mark.xdist_group("examples")]

EXAMPLES = processes.REPO_ROOT / "examples"
TIMEOUT_S = 240

# Example -> command-line arguments (small settings where the script has them).
RUNS = {
  "quickstart": [],
  "train_infill": ["--steps", "300"],
  "batched": [],
  "sharded": ["--cpu"],
  "export_onnx": ["--steps", "100"],
  "ported_lookup": ["--steps", "100"],
  "message_passing": ["--steps", "300"],
}
# Examples that need an optional extra, skipped where it cannot install.
NEEDS = {
  "export_onnx": pytest.mark.skipif(
    sys.version_info < (3, 11), reason="jaxops[onnx] needs Python >= 3.11"
  )
}
# Examples whose runs, and the tests of their output, are part of
# --exhaustive (tests/conftest.py).
EXHAUSTIVE = (
  "batched",
  "export_onnx",
  "ported_lookup",
  "message_passing",
  "train_infill",
  "sharded",
)


def _execute(name: str) -> dict[str, object]:
  env = processes.subprocess_env()
  env.pop("XLA_FLAGS", None)
  start = time.perf_counter()
  try:
    proc = subprocess.run(
      [sys.executable, str(EXAMPLES / f"{name}.py"), *RUNS[name]],
      env=env,
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
      check=False,
    )
  except subprocess.TimeoutExpired as e:
    # The partial output of a timed-out run is bytes even with text=True.
    partial = e.stdout or b""
    return {
      "returncode": None,
      "stdout": partial.decode(errors="replace")
      if isinstance(partial, bytes)
      else partial,
      "stderr": f"timed out after {TIMEOUT_S} s",
      "seconds": TIMEOUT_S,
    }
  return {
    "returncode": proc.returncode,
    "stdout": proc.stdout,
    "stderr": proc.stderr[-4000:],
    "seconds": time.perf_counter() - start,
  }


@pytest.fixture(scope="session")
def example_output(tmp_path_factory, worker_id):
  """name -> {returncode, stdout, stderr, seconds}, each example run once."""
  shared = processes.shared_dir(tmp_path_factory, worker_id, "examples")
  cache: dict[str, dict[str, object]] = {}

  def get(name: str) -> dict[str, object]:
    if name not in cache:
      path = processes.produce_once(
        shared,
        f"example_{name}.json",
        lambda partial: partial.write_text(json.dumps(_execute(name))),
        TIMEOUT_S,
      )
      cache[name] = json.loads(path.read_text())
    return cache[name]

  return get


def _stdout(example_output, name: str) -> str:
  result = example_output(name)
  assert result["returncode"] == 0, (
    f"{name}.py exited with {result['returncode']}\nstdout:\n"
    f"{result['stdout']}\nstderr:\n{result['stderr']}"
  )
  return result["stdout"]


def _floats(pattern: str, text: str) -> list[float]:
  return [float(x) for x in re.findall(pattern, text)]


@pytest.mark.parametrize(
  "name",
  [
    pytest.param(
      name,
      marks=[
        *([NEEDS[name]] if name in NEEDS else []),
        *([pytest.mark.exhaustive] if name in EXHAUSTIVE else []),
      ],
    )
    for name in sorted(RUNS)
  ],
)
def test_example_runs_quickly(example_output, name):
  _stdout(example_output, name)
  # Generous: the machine running the suite may be loaded. The export example
  # also starts jax2onnx (its plugin registry) and OpenVINO's converter.
  limit = 180 if name == "export_onnx" else 90
  assert example_output(name)["seconds"] < limit


def test_quickstart_loss_falls_and_gradients_check(example_output):
  out = _stdout(example_output, "quickstart")
  losses = _floats(r"loss (\d+\.\d+)", out)
  assert len(losses) >= 2 and losses[-1] < losses[0] - 0.3, out
  assert (
    "check_grads (float64, order 2, forward and reverse mode): passed" in out
  )


def _infill_result(out: str) -> tuple[float, float, float]:
  match = re.search(
    r"RESULT held-out loss (\d+\.\d+) -> (\d+\.\d+), "
    r"Bayes-optimal (\d+\.\d+)",
    out,
  )
  assert match, out
  return tuple(float(x) for x in match.groups())


@pytest.mark.exhaustive
def test_train_infill_loss_falls_towards_bayes(example_output):
  out = _stdout(example_output, "train_infill")
  initial, final, bayes = _infill_result(out)
  assert abs(initial - 2.6391) < 0.1, f"untrained loss {initial} != log(14)"
  assert final < initial - 1.0, out
  assert final - bayes < 0.15, f"300 steps end {final - bayes:.3f} above Bayes"
  during = _floats(r"held-out loss (\d+\.\d+)\n", out)  # the step lines
  assert len(during) == 6 and during[-1] < during[0], out  # 1, 25..200, 300


@pytest.mark.exhaustive
def test_train_infill_does_not_beat_bayes(example_output):
  # Beating the Bayes-optimal loss on 4096 held-out examples by more than
  # noise would mean the model sees the hidden symbol (a masking bug).
  initial, final, bayes = _infill_result(
    _stdout(example_output, "train_infill")
  )
  assert final > bayes - 0.05, (final, bayes)


@pytest.mark.exhaustive
def test_batched_vmap_equals_loop(example_output):
  out = _stdout(example_output, "batched")
  rows = [line for line in out.splitlines() if "max |difference|" in line]
  assert len(rows) == 13, out
  for row in rows:
    assert row.endswith("max |difference| 0  equal"), row
  assert "RESULT 13 vmap-vs-loop cases: all equal" in out


@pytest.mark.exhaustive
def test_sharded_equals_unsharded(example_output):
  out = _stdout(example_output, "sharded")
  assert out.startswith("8 cpu devices"), out
  rows = [line for line in out.splitlines() if "equal=" in line]
  assert len(rows) == 15, out
  assert all("equal=True" in row for row in rows), out
  assert "RESULT 15/15 sharded results equal the unsharded ones" in out


@pytest.mark.exhaustive
def test_sharded_communication_only_where_expected(example_output):
  out = _stdout(example_output, "sharded")
  assert "15/15 layouts communicate exactly where expected" in out, out
  free = [line for line in out.splitlines() if "collectives: none" in line]
  assert len(free) == 8, out


@pytest.mark.exhaustive
def test_message_passing_learns_to_the_noise_floor(example_output):
  out = _stdout(example_output, "message_passing")
  assert "deterministic (two runs bit-equal): True" in out, out
  assert "jaxops sum == plain .at[].add: True" in out, out
  match = re.search(
    r"RESULT loss (\d+\.\d+) -> (\d+\.\d+), noise floor (\d+\.\d+)", out
  )
  assert match, out
  initial, final, floor = (float(x) for x in match.groups())
  assert final < initial / 100, out
  # Far below the noise floor would mean the labels leaked; far above it,
  # that a reduction's gradient is wrong.
  assert floor / 2 < final < 10 * floor, out
  steps = _floats(r"loss (\d+\.\d+)\n", out)
  assert len(steps) == 4 and steps[-1] < steps[0], out


@NEEDS["export_onnx"]
@pytest.mark.exhaustive
def test_export_onnx_runtimes_agree_with_fewer_nodes(example_output):
  out = _stdout(example_output, "export_onnx")
  match = re.search(r"held-out loss (\d+\.\d+) -> (\d+\.\d+)", out)
  assert match, out
  assert float(match[2]) < float(match[1]) - 0.5, out
  counts = [int(n) for n in re.findall(r"(\d+) nodes \(", out)]
  if "plain jax2onnx: cannot export" in out:
    # The gathers' jaxops_batched_like has no plain jax2onnx lowering.
    assert "jaxops_batched_like" in out and len(counts) == 1, out
  else:
    plain, ours = counts
    assert ours < plain, out
  line = next(
    line for line in out.splitlines() if line.startswith("jaxops.onnx:")
  )
  for kind in ("GatherND 2", "GatherElements 1", "ScatterND 1", "Slice 3"):
    assert kind in line, line
  assert out.count("predictions equal") == 2, out
  assert "RESULT JAX, onnxruntime and OpenVINO agree" in out


@pytest.mark.exhaustive
def test_ported_lookup_matches_openvino_and_trains(example_output):
  """Gather-8 and Slice-8 in a ported model: the jaxops port equals the
  OpenVINO original bit for bit (padding ids read zeros), the jnp.take port
  does not, and fine-tuning through both operators lowers the loss."""
  out = _stdout(example_output, "ported_lookup")
  assert "jaxops port equals OpenVINO bit for bit: True" in out, out
  differs = re.search(r"hand port \(jnp.take\) differs on (\d+) of", out)
  assert differs and int(differs[1]) > 0, out
  loss = re.search(r"fine-tuning loss (\d+\.\d+) -> (\d+\.\d+)", out)
  assert loss and float(loss[2]) < 0.7 * float(loss[1]), out
  assert "RESULT the jaxops port matches OpenVINO" in out
