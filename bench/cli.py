"""`python -m bench`: runs the cases, gates on bit-exactness, writes results.

Outputs in `--out` (default `bench/results`): `results.json` (everything,
including the environment), `results.md` (the tables also printed on
stdout) and PNG plots. See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import gc
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from bench import harness, ops, report, runtimes

_THREAD_VARS = ("XLA_FLAGS", "JAX_PLATFORMS", "OMP_NUM_THREADS",
                "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS", "CUDA_VISIBLE_DEVICES",
                "GLIBC_TUNABLES")
_HUGETLB = "glibc.malloc.hugetlb=1"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      prog="python -m bench", description=__doc__,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--ops", default=",".join(ops.NAMES),
                      help="comma-separated operators (default: all of "
                      f"{', '.join(ops.NAMES)})")
  parser.add_argument("--cases", default="*",
                      help="comma-separated glob patterns on 'op/case' or "
                      "'case', e.g. 'ir*,large' (default: all)")
  parser.add_argument("--tiers", default="ir,large,sweep",
                      help="comma-separated tiers: ir, large, sweep")
  parser.add_argument("--variants", default="*",
                      help="comma-separated glob patterns on variant names, "
                      "e.g. 'jaxops*,openvino' (default: all)")
  parser.add_argument("--reps", type=int, default=50,
                      help="at most this many timed calls per variant")
  parser.add_argument("--min-reps", type=int, default=10,
                      help="at least this many timed calls per variant")
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--budget", type=float, default=1.0,
                      help="seconds of timed calls per variant before "
                      "stopping early (sweep cases get half)")
  parser.add_argument("--threads", type=int, default=2,
                      help="threads for OpenVINO and onnxruntime")
  parser.add_argument("--out", default=os.path.join("bench", "results"),
                      help="output folder (created)")
  parser.add_argument("--smoke", action="store_true",
                      help="tiny sizes and few repetitions (seconds)")
  parser.add_argument("--no-plots", action="store_true")
  parser.add_argument(
      "--hugetlb", action="store_true",
      help="restart with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (transparent "
      "huge pages for malloc): XLA:CPU allocates every output afresh, and "
      "with 4 KiB pages a 64 MiB output costs 16384 page faults per call")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.smoke:
    args.reps, args.min_reps, args.warmup = min(args.reps, 3), 1, 1
    args.budget = min(args.budget, 0.05)
  return args


def _transparent_hugepages() -> str | None:
  try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
      return f.read().strip()
  except OSError:
    return None


def environment(threads: int) -> dict[str, Any]:
  import jaxlib
  import jaxops
  device = jax.devices()[0]
  cpu_model = ""
  try:
    with open("/proc/cpuinfo") as f:
      cpu_model = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "")
  except OSError:
    pass
  return {
      "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      "python": platform.python_version(),
      "platform": platform.platform(),
      "numpy": np.__version__,
      "jax": jax.__version__,
      "jaxlib": jaxlib.__version__,
      "jaxops": jaxops.__version__,
      "x64": bool(jax.config.jax_enable_x64),
      "backend": jax.default_backend(),
      "device_kind": device.device_kind,
      "device_count": jax.device_count(),
      "cpu_count": os.cpu_count(),
      "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(
          os, "sched_getaffinity") else None,
      "cpu_model": cpu_model,
      "thread_env": {k: os.environ.get(k) for k in _THREAD_VARS},
      "transparent_hugepages": _transparent_hugepages(),
      "peer_threads": threads,
      "peers": runtimes.versions(),
      "loadavg_start": list(os.getloadavg()),
  }


def select_cases(args) -> tuple[list[harness.Case], dict[str, str]]:
  cases, skipped = [], {}
  tiers = set(args.tiers.split(","))
  patterns = args.cases.split(",")
  for name in args.ops.split(","):
    if name not in ops.NAMES:
      raise SystemExit(f"unknown operator {name!r}; choose from {ops.NAMES}")
    plugin = ops.load(name)
    if plugin is None:
      skipped[name] = f"jaxops has no {name} yet"
      continue
    for case in plugin.cases(args.smoke):
      if case.tier in tiers and any(
          fnmatch.fnmatch(case.key, p) or fnmatch.fnmatch(case.name, p)
          for p in patterns):
        cases.append(case)
  return cases, skipped


def run_case(case: harness.Case, args, bandwidth_Bps: float,
             progress) -> dict[str, Any]:
  """Builds, cross-checks and times every selected variant of `case`."""
  rng = np.random.default_rng(args.seed)
  inputs = case.make_inputs(rng)
  jax_args = [jax.device_put(a) for a in inputs]
  out_shape = jax.eval_shape(case.forms["jaxops"], *jax_args).shape
  weights = jax.device_put(harness.small_ints(rng, out_shape, 2))
  patterns = args.variants.split(",")
  absent = runtimes.missing()
  planned = harness.plan_variants(case, jax_args, weights, inputs, out_shape,
                                  args.threads)
  record: dict[str, Any] = {
      "op": case.op, "name": case.name, "key": case.key, "tier": case.tier,
      "shapes": case.shapes, "sweep": case.sweep, "size": case.size,
      "out_shape": list(out_shape), "variants": {}, "skipped": {},
      "traffic": {
          "floor_bytes": case.traffic.floor_bytes(),
          "line_floor_bytes": case.traffic.line_floor_bytes(),
          "copy_bytes": case.traffic.copy},
  }
  record["floor_s"] = case.traffic.floor_bytes() / bandwidth_Bps
  record["line_floor_s"] = case.traffic.line_floor_bytes() / bandwidth_Bps
  record["copy_s"] = case.traffic.copy / bandwidth_Bps
  runners, outputs = {}, {}
  for variant in planned:
    if not any(fnmatch.fnmatch(variant.name, p) for p in patterns):
      continue
    peer = variant.name in ("openvino", "onnxruntime")
    if peer and (variant.name in absent or "onnx" in absent and
                 variant.name == "onnxruntime"):
      record["skipped"][variant.name] = absent.get(variant.name,
                                                   absent.get("onnx"))
      continue
    progress.set_postfix_str(f"{case.key} {variant.name}: compile")
    try:
      runner = variant.build()
      out = runner.call(runner.setup())
      jax.block_until_ready(out)
    except Exception as e:  # a peer that rejects the model is noted, not fatal
      if not peer:
        raise
      record["skipped"][variant.name] = f"{type(e).__name__}: {e}"[:300]
      continue
    outputs[variant.name] = (variant.group, runner.outputs(out))
    runners[variant.name] = (variant, runner)
  record["checks"] = harness.check_bit_exact(case, outputs)
  del outputs
  budget = args.budget / 2 if case.tier == "sweep" else args.budget
  progress.set_postfix_str(f"{case.key}: timing {len(runners)} variants")
  timings = harness.measure({name: r for name, (_, r) in runners.items()},
                            args.warmup, args.reps, budget, args.min_reps)
  for name, (variant, runner) in runners.items():
    timing = timings[name]
    entry = {"group": variant.group, "compile_s": runner.compile_s,
             "median_s": timing.median_s, "p10_s": timing.p10_s,
             "p90_s": timing.p90_s, "reps": timing.reps,
             "donated": variant.donated}
    if variant.donated:
      entry["donation_used"] = bool(runner.state.get("donated"))
    record["variants"][name] = entry
  return record


def main(argv: Sequence[str] | None = None) -> int:
  args = parse_args(argv)
  tunables = os.environ.get("GLIBC_TUNABLES", "")
  if args.hugetlb and _HUGETLB not in tunables:
    # glibc reads its tunables at process start only.
    env = dict(os.environ,
               GLIBC_TUNABLES=":".join(t for t in (tunables, _HUGETLB) if t))
    argv = sys.argv[1:] if argv is None else list(argv)
    os.execve(sys.executable, [sys.executable, "-m", "bench", *argv], env)
  from tqdm import tqdm
  os.makedirs(args.out, exist_ok=True)
  # Import the peer runtimes before JAX starts its threads: one of them forks
  # a helper process at import, which JAX warns may deadlock.
  runtimes.versions()
  env = environment(args.threads)
  bandwidth = harness.measure_bandwidth((32 if args.smoke else 512) << 20)
  on_cpu = env["backend"] == "cpu"
  bandwidth["used"] = "host_copyto_Bps" if on_cpu else "device_copy_Bps"
  bw = bandwidth[bandwidth["used"]]
  cases, skipped_ops = select_cases(args)
  results = {"env": env, "bandwidth": bandwidth, "config": vars(args),
             "skipped_ops": skipped_ops, "cases": []}
  json_path = os.path.join(args.out, "results.json")
  start = time.perf_counter()
  failure = None
  with tqdm(total=len(cases), desc="bench", unit="case",
            file=sys.stderr, dynamic_ncols=True) as progress:
    for case in cases:
      try:
        results["cases"].append(run_case(case, args, bw, progress))
      except harness.BitExactError as e:
        failure = e
        break
      finally:
        gc.collect()
      progress.update()
  env["loadavg_end"] = list(os.getloadavg())
  results["wall_s"] = time.perf_counter() - start
  results["bit_exact_failure"] = str(failure) if failure else None
  with open(json_path, "w") as f:
    json.dump(results, f, indent=1)
  text = report.markdown(results)
  with open(os.path.join(args.out, "results.md"), "w") as f:
    f.write(text)
  print(text)
  if not args.no_plots:
    for path in report.plots(results, args.out):
      print(f"wrote {path}", file=sys.stderr)
  print(f"wrote {json_path}", file=sys.stderr)
  if failure:
    print(f"BIT-EXACTNESS FAILURE: {failure}", file=sys.stderr)
    return 1
  return 0
