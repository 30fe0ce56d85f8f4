"""`python -m bench`: runs the cases, gates on bit-exactness, writes results.

Plans the variants of every case (`plan_variants`), builds them, checks
their outputs bit for bit, times them, evaluates the operators' bars and
writes, in `--out` (default `bench/results`): `results.json` (everything,
including the environment and the bar verdicts), `results.md` (the tables
also printed on stdout) and PNG plots. `--reference` writes the committed
reference results instead (bench/RESULTS[-<allocator>].md/.json). See
bench/README.md for how to read them.
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

from bench import allocator, harness, ops, report, runtimes

_THREAD_VARS = (
  "XLA_FLAGS",
  "JAX_PLATFORMS",
  "JAX_ENABLE_X64",
  "OMP_NUM_THREADS",
  "OMP_WAIT_POLICY",
  "MKL_NUM_THREADS",
  "OPENBLAS_NUM_THREADS",
  "TF_NUM_INTRAOP_THREADS",
  "CUDA_VISIBLE_DEVICES",
)
_TIERS = ("ir", "large", "sweep", "vmap")
_REFERENCE_MIN_REPS = 30
# Rounds of the variants an "at or ahead" bar may call a tie: on the
# 10-40 ms fwd+bwd calls 30 rounds bound the paired median within 5-15%,
# too wide to tell a tie from a 5% loss (bench.bars.tie).
_REFERENCE_TIE_REPS = 150
_REFERENCE_DIR = "bench"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
    prog="python -m bench",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
    "--ops",
    default=",".join(ops.NAMES),
    help=f"comma-separated operators (default: all of {', '.join(ops.NAMES)})",
  )
  parser.add_argument(
    "--cases",
    default="*",
    help="comma-separated glob patterns on 'op/case' or "
    "'case', e.g. 'ir*,large' (default: all)",
  )
  parser.add_argument(
    "--tiers",
    default=",".join(_TIERS),
    help="comma-separated tiers: " + ", ".join(_TIERS),
  )
  parser.add_argument(
    "--variants",
    default="*",
    help="comma-separated glob patterns on variant names, "
    "e.g. 'jaxops*,openvino' (default: all)",
  )
  parser.add_argument(
    "--reps",
    type=int,
    default=300,
    help="at most this many timed calls per variant (the budget stops "
    "slower ones first)",
  )
  parser.add_argument(
    "--min-reps",
    type=int,
    default=None,
    help="at least this many timed calls per variant (default 10; "
    f"{_REFERENCE_MIN_REPS} with --reference)",
  )
  parser.add_argument(
    "--tie-reps",
    type=int,
    default=None,
    help="at least this many timed calls of the variants an 'at or ahead' "
    "bar compares (default: --min-reps; "
    f"{_REFERENCE_TIE_REPS} with --reference)",
  )
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument(
    "--budget",
    type=float,
    default=0.5,
    help="seconds of timed calls per variant before "
    "stopping early (sweep cases get half)",
  )
  parser.add_argument(
    "--threads",
    type=int,
    default=2,
    help="threads for OpenVINO, onnxruntime and PyTorch",
  )
  parser.add_argument(
    "--out",
    default=os.path.join("bench", "results"),
    help="output folder (created)",
  )
  parser.add_argument(
    "--smoke",
    action="store_true",
    help="tiny sizes and few repetitions (seconds)",
  )
  parser.add_argument("--no-plots", action="store_true")
  parser.add_argument(
    "--allocator",
    choices=allocator.MODES,
    default="system",
    help="restart with this malloc: system (glibc as is), hugetlb (glibc "
    "with transparent huge pages), glibc-heap (glibc kept to its heap: one "
    "arena, no mmap, no trim), jemalloc or tcmalloc (LD_PRELOAD). "
    "XLA:CPU allocates every output afresh, and with glibc and 4 KiB pages "
    "a 64 MiB output costs 16384 page faults per call; see "
    "docs/cpu-performance.md",
  )
  parser.add_argument(
    "--hugetlb",
    action="store_const",
    dest="allocator",
    const="hugetlb",
    help="same as --allocator hugetlb",
  )
  parser.add_argument(
    "--reference",
    action="store_true",
    help="write the reference results, bench/RESULTS.md/.json (system "
    "allocator) or bench/RESULTS-<allocator>.md/.json, without plots",
  )
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.min_reps is None:
    # Enough rounds for a paired ratio to resolve a tie (bench.bars.tie)
    # on the slowest calls too.
    args.min_reps = _REFERENCE_MIN_REPS if args.reference else 10
  if args.tie_reps is None:
    args.tie_reps = _REFERENCE_TIE_REPS if args.reference else args.min_reps
  if args.smoke:
    args.reps, args.min_reps, args.warmup = min(args.reps, 3), 1, 1
    args.tie_reps = 1
    args.budget = min(args.budget, 0.05)
  if args.reference:
    args.out, args.no_plots = _REFERENCE_DIR, True
  return args


def _transparent_hugepages() -> str | None:
  try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
      return f.read().strip()
  except OSError:
    return None


def scatter_order() -> str:
  """Which path the scatters with repeated targets take in this run
  (docs/semantics.md#repeat-order)."""
  from jaxops import _order

  if jax.default_backend() == "cpu" and not _order.constructed_only():
    return "serial (XLA:CPU's scatter)"
  return "constructed"


def environment(threads: int, mode: str) -> dict[str, Any]:
  import jaxlib

  import jaxops

  device = jax.devices()[0]
  cpu_model = ""
  try:
    with open("/proc/cpuinfo") as f:
      cpu_model = next(
        (
          line.split(":", 1)[1].strip()
          for line in f
          if line.startswith("model name")
        ),
        "",
      )
  except OSError:
    pass
  return {
    "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
      timespec="seconds"
    ),
    "python": platform.python_version(),
    "platform": platform.platform(),
    "numpy": np.__version__,
    "jax": jax.__version__,
    "jaxlib": jaxlib.__version__,
    "jaxops": jaxops.__version__,
    "x64": bool(jax.config.jax_enable_x64),
    "backend": jax.default_backend(),
    "scatter_order": scatter_order(),
    "device_kind": device.device_kind,
    "device_count": jax.device_count(),
    "cpu_count": os.cpu_count(),
    "cpu_affinity": len(os.sched_getaffinity(0))
    if hasattr(os, "sched_getaffinity")
    else None,
    "cpu_model": cpu_model,
    "thread_env": {k: os.environ.get(k) for k in _THREAD_VARS},
    "allocator": allocator.describe(mode),
    "transparent_hugepages": _transparent_hugepages(),
    "peer_threads": threads,
    "peers": runtimes.versions(),
    "loadavg_start": list(os.getloadavg()),
  }


def select_cases(args) -> list[harness.Case]:
  cases = []
  tiers = set(args.tiers.split(","))
  if tiers - set(_TIERS):
    raise SystemExit(
      f"unknown tier(s) {sorted(tiers - set(_TIERS))}; choose from {_TIERS}"
    )
  patterns = args.cases.split(",")
  for name in args.ops.split(","):
    if name not in ops.NAMES:
      raise SystemExit(f"unknown operator {name!r}; choose from {ops.NAMES}")
    for case in ops.load(name).cases(args.smoke):
      if case.tier in tiers and any(
        fnmatch.fnmatch(case.key, p) or fnmatch.fnmatch(case.name, p)
        for p in patterns
      ):
        cases.append(case)
  return cases


def plan_variants(
  case: harness.Case,
  args: Sequence[jax.Array],
  weights: jax.Array,
  inputs: Sequence[np.ndarray],
  out_shape: tuple[int, ...],
  threads: int,
) -> list[harness.Variant]:
  """Every variant of `case`, forward group first, in a fixed order.

  * `<form>`          forward under `jax.jit`;
  * `loop`            (vmap cases) a Python loop of jitted per-example calls;
  * `<form>.donated`  forward with the data buffer donated;
  * `openvino`, `onnxruntime`, `torch`  the peer calls; `torch.inplace`
                      PyTorch's in-place form on a fresh copy;
  * `<form>.grad`     `jax.value_and_grad` of `sum(form(...) * w)`, the
                      weights `w` an argument so XLA cannot constant-fold
                      them; `torch.grad` the same with PyTorch's autograd.
  """
  V = harness.Variant
  variants = []
  run_threads, threads = threads, case.peer_threads or threads
  # A sweep of a donatable op is about the donated (in-place) time; the
  # out-of-place variants would only add the data copy to every point.
  in_place_sweep = case.tier == "sweep" and case.donate_argnum is not None
  if not in_place_sweep:
    for form, fn in case.forms.items():
      variants.append(
        V(form, "fwd", lambda fn=fn: harness.jax_runner(fn, args))
      )
  if case.loop is not None:
    variants.append(
      V(
        "loop",
        "fwd",
        lambda: harness.loop_runner(case.loop, args, case.in_axes),
      )
    )
  if case.donate_argnum is not None:
    for form, fn in case.forms.items():
      variants.append(
        V(
          f"{form}.donated",
          "fwd",
          lambda fn=fn: harness.jax_runner(fn, args, case.donate_argnum),
          donated=True,
        )
      )

  def peer(name, formulation, build, requires, **kw):
    if case.peers and formulation is not None:
      variants.append(V(name, "fwd", build, requires=requires, **kw))

  peer(
    "openvino",
    case.openvino,
    lambda: runtimes.openvino_runner(case.openvino, inputs, threads),
    ("openvino",),
  )
  onnx_threads = {"onnxruntime": threads}
  if case.threaded_peer:
    # On the run's threads too: it may race, so its output is marked,
    # not gated.
    onnx_threads["onnxruntime.threads"] = run_threads

  def onnxruntime_runner(inputs, n):
    return runtimes.onnxruntime_runner(case.onnx(inputs), inputs, out_shape, n)

  for name, n in onnx_threads.items():
    racy = name != "onnxruntime"
    peer(
      name,
      case.onnx,
      lambda n=n: onnxruntime_runner(inputs, n),
      ("onnxruntime", "onnx"),
      may_differ=racy,
      order_check=(
        lambda probe, n=n: (
          onnxruntime_runner(probe, n),
          onnxruntime_runner(probe, threads),
        )
      )
      if racy
      else None,
      threads=n if racy else None,
    )
  peer(
    "torch",
    case.torch,
    lambda: runtimes.torch_runner(case.torch, inputs, threads),
    ("torch",),
  )
  peer(
    "torch.inplace",
    case.torch_inplace,
    lambda: runtimes.torch_inplace_runner(
      case.torch_inplace, inputs, case.donate_argnum, threads
    ),
    ("torch",),
    donated=True,
  )
  if case.grad:
    # A loss of means rounds in each program's own order of summation, and
    # XLA:GPU picks that order per program: so the plain forms' too.
    loss = case.peer_grad_convention
    loss_rule = loss[0] if loss and loss[0] == harness.LOSS_ORDER else None
    for form, fn in case.forms.items():
      if case.grad_forms is None or form in case.grad_forms:
        variants.append(
          V(
            f"{form}.grad",
            "fwdbwd",
            lambda fn=fn: harness.jax_runner(
              harness.fwd_bwd(fn, case.diff_argnums), (*args, weights)
            ),
            convention=loss_rule,
          )
        )
    if case.peers and case.torch is not None:
      convention = case.peer_grad_convention
      variants.append(
        V(
          "torch.grad",
          "fwdbwd",
          lambda: runtimes.torch_grad_runner(
            case.torch, inputs, np.asarray(weights), case.diff_argnums, threads
          ),
          requires=("torch",),
          convention=convention[0] if convention else None,
        )
      )
  return variants


def _forward_output(case: harness.Case, references, jax_args) -> np.ndarray:
  """jaxops' forward output: the forward reference's (every forward variant
  has its bits), or computed where no forward variant was selected."""
  if "fwd" in references:
    return references["fwd"][1][0]
  return np.asarray(jax.jit(case.forms["jaxops"])(*jax_args))


def _order_difference(variant: harness.Variant, inputs, rng) -> str | None:
  """How `variant` differs from its serial form (the same runtime on one
  thread, which applies repeated targets in index order as the
  specifications' loops do) on `harness.order_probe`'s inputs, or None."""
  probe = harness.order_probe(rng, inputs)
  outputs = [
    runner.outputs(runner.call(runner.setup()))
    for runner in variant.order_check(probe)
  ]
  difference = harness.first_difference(*outputs)
  if difference is None:
    return None
  return f"on random floats, where the order of a sum shows: {difference}"


def _paired(runners, timings) -> dict[str, dict[str, float]]:
  """`harness.paired_ratio` of every jaxops variant over every other
  variant of its group, keyed "<jaxops variant> / <other>"."""
  out = {}
  for a, (variant_a, _) in runners.items():
    for b, (variant_b, _) in runners.items():
      if (
        a.startswith("jaxops")
        and not b.startswith("jaxops")
        and variant_a.group == variant_b.group
      ):
        ratio = harness.paired_ratio(timings[a].rounds_s, timings[b].rounds_s)
        if ratio is not None:
          out[f"{a} / {b}"] = ratio
  return out


def run_case(
  case: harness.Case, args, bandwidth_Bps: float, progress
) -> dict[str, Any]:
  """Builds, cross-checks and times every selected variant of `case`."""
  rng = np.random.default_rng(args.seed)
  inputs = case.make_inputs(rng)
  jax_args = [jax.device_put(a) for a in inputs]
  out_shape = jax.eval_shape(case.forms["jaxops"], *jax_args).shape
  weights = jax.device_put(harness.small_ints(rng, out_shape, 2))
  patterns = args.variants.split(",")
  absent = runtimes.missing()
  planned = plan_variants(
    case, jax_args, weights, inputs, out_shape, args.threads
  )
  record: dict[str, Any] = {
    "op": case.op,
    "name": case.name,
    "key": case.key,
    "tier": case.tier,
    "shapes": case.shapes,
    "sweep": case.sweep,
    "size": case.size,
    "unique": case.unique,
    "peer_threads": case.peer_threads,
    "batch": case.batch,
    "in_axes": list(case.in_axes) if case.in_axes else None,
    "out_shape": list(out_shape),
    "variants": {},
    "skipped": {},
    "traffic": {
      "floor_bytes": case.traffic.floor_bytes(),
      "line_floor_bytes": case.traffic.line_floor_bytes(),
      "copy_bytes": case.traffic.copy,
    },
  }
  record["floor_s"] = case.traffic.floor_bytes() / bandwidth_Bps
  record["line_floor_s"] = case.traffic.line_floor_bytes() / bandwidth_Bps
  record["copy_s"] = case.traffic.copy / bandwidth_Bps
  selected = lambda name: any(fnmatch.fnmatch(name, p) for p in patterns)
  for name, why in case.excluded.items():
    if selected(name):
      record["skipped"][name] = why
  # Each variant is compared with the first of its group as soon as it has
  # run, so that only those references stay in memory.
  runners, references, checks, wrong, conventions = {}, {}, [], {}, {}
  for variant in planned:
    if not selected(variant.name):
      continue
    lacking = [p for p in variant.requires if p in absent]
    if lacking:
      record["skipped"][variant.name] = absent[lacking[0]]
      continue
    progress.set_postfix_str(f"{case.key} {variant.name}: compile")
    try:
      runner = variant.build()
      out = runner.call(runner.setup())
      jax.block_until_ready(out)
    except Exception as e:  # a peer that rejects the model is noted, not fatal
      if not variant.requires:
        raise
      record["skipped"][variant.name] = f"{type(e).__name__}: {e}"[:300]
      continue
    leaves = runner.outputs(out)
    del out
    if variant.may_differ:
      wrong[variant.name] = (
        harness.first_difference(leaves, references[variant.group][1])
        if variant.group in references
        else "not compared: no reference variant ran"
      )
      if wrong[variant.name] is None and variant.order_check is not None:
        wrong[variant.name] = _order_difference(variant, inputs, rng)
    elif variant.group in references:
      left_out = None
      if variant.convention and case.peer_grad_convention:
        left_out = case.peer_grad_convention[1](
          inputs, _forward_output(case, references, jax_args)
        )
        conventions[variant.name] = harness.left_out_differences(
          leaves, references[variant.group][1], left_out
        )
      checks += harness.compare_outputs(
        case, variant.name, leaves, *references[variant.group], left_out
      )
    else:
      references[variant.group] = (variant.name, leaves)
    del leaves
    runners[variant.name] = (variant, runner)
  record["checks"] = checks
  del references
  budget = args.budget / 2 if case.tier == "sweep" else args.budget
  progress.set_postfix_str(f"{case.key}: timing {len(runners)} variants")
  tie_variants = frozenset().union(
    *(bar.tie_variants(record) for bar in ops.load(case.op).BARS)
  )
  timings = harness.measure(
    {name: r for name, (_, r) in runners.items()},
    args.warmup,
    args.reps,
    budget,
    {
      name: max(args.min_reps, args.tie_reps)
      if name in tie_variants
      else args.min_reps
      for name in runners
    },
  )
  record["paired"] = _paired(runners, timings)
  for name, (variant, runner) in runners.items():
    timing = timings[name]
    entry = {
      "group": variant.group,
      "compile_s": runner.compile_s,
      "compile_cpu_s": runner.compile_cpu_s,
      "iqm_s": timing.iqm_s,
      "p10_s": timing.p10_s,
      "p90_s": timing.p90_s,
      "reps": timing.reps,
      "donated": variant.donated,
      "peer": bool(variant.requires),
    }
    if variant.donated and "donated" in runner.state:
      entry["donation_used"] = bool(runner.state["donated"])
    if variant.may_differ:
      entry["threads"] = variant.threads
      entry["wrong"] = wrong[variant.name]
    if name in conventions:
      entry["convention"] = {"rule": variant.convention, **conventions[name]}
    record["variants"][name] = entry
  return record


class _LineProgress:
  """The part of tqdm's interface `main` uses, as one line per finished case:
  what `python -m bench > log 2>&1` should read (tqdm's bar would be one
  line of carriage returns)."""

  def __init__(self, total: int, file: Any):
    self.total, self.file = total, file
    self.done, self.status = 0, ""
    self.start = time.perf_counter()

  def __enter__(self) -> _LineProgress:
    return self

  def __exit__(self, *exc: object) -> None:
    return None

  def set_postfix_str(self, status: str) -> None:
    self.status = status

  def update(self, n: int = 1) -> None:
    self.done += n
    elapsed = time.perf_counter() - self.start
    print(
      f"bench: {self.done}/{self.total} cases, {elapsed:.0f} s: {self.status}",
      file=self.file,
      flush=True,
    )


def progress_bar(total: int, file: Any) -> Any:
  """A tqdm bar over `total` cases on a terminal, one line per case
  elsewhere."""
  if not file.isatty():
    return _LineProgress(total, file)
  from tqdm import tqdm

  return tqdm(
    total=total, desc="bench", unit="case", file=file, dynamic_ncols=True
  )


def _reference_paths(mode: str) -> tuple[str, str]:
  stem = "RESULTS" if mode == "system" else f"RESULTS-{mode}"
  return (
    os.path.join(_REFERENCE_DIR, f"{stem}.json"),
    os.path.join(_REFERENCE_DIR, f"{stem}.md"),
  )


def _reference_header(mode: str, json_path: str) -> str:
  command = "python -m bench --reference" + (
    "" if mode == "system" else f" --allocator {mode}"
  )
  return (
    "# jaxops benchmark: reference run\n\n"
    f"Output of `{command}` (regenerate with the same command) on the "
    "2-core development machine, shared with other jobs: see the load "
    "average in the header, timings are noisy and ratios within ~15% are "
    "parity. The JSON beside this file holds every number; compare a new "
    f"run with `python -m bench.compare {json_path} "
    "bench/results/results.json`.\n\n"
  )


def main(argv: Sequence[str] | None = None) -> int:
  args = parse_args(argv)
  env_restart = allocator.restart_env(args.allocator, dict(os.environ))
  if env_restart is not None:
    # The loader and glibc read LD_PRELOAD and GLIBC_TUNABLES at process
    # start only.
    argv = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(
      sys.executable, [sys.executable, "-m", "bench", *argv], env_restart
    )
  os.makedirs(args.out, exist_ok=True)
  # Import the peer runtimes before JAX starts its threads: one of them forks
  # a helper process at import, which JAX warns may deadlock.
  runtimes.prepare_environment()
  runtimes.versions()
  env = environment(args.threads, args.allocator)
  bandwidth = harness.measure_bandwidth((32 if args.smoke else 512) << 20)
  on_cpu = env["backend"] == "cpu"
  bandwidth["used"] = "host_copyto_Bps" if on_cpu else "device_copy_Bps"
  bw = bandwidth[bandwidth["used"]]
  cases = select_cases(args)
  results = {
    "env": env,
    "bandwidth": bandwidth,
    "config": vars(args),
    "cases": [],
  }
  if args.reference:
    json_path, md_path = _reference_paths(args.allocator)
  else:
    json_path = os.path.join(args.out, "results.json")
    md_path = os.path.join(args.out, "results.md")
  start = time.perf_counter()
  failure = None
  with progress_bar(len(cases), sys.stderr) as progress:
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
  results["bars"] = report.evaluate_bars(results)
  with open(json_path, "w") as f:
    json.dump(results, f, indent=1)
  text = report.markdown(results)
  with open(md_path, "w") as f:
    f.write(
      _reference_header(args.allocator, json_path) + text
      if args.reference
      else text
    )
  print(text)
  if not args.no_plots:
    for path in report.plots(results, args.out):
      print(f"wrote {path}", file=sys.stderr)
  print(f"wrote {json_path} and {md_path}", file=sys.stderr)
  if failure:
    print(f"BIT-EXACTNESS FAILURE: {failure}", file=sys.stderr)
    return 1
  return 0
