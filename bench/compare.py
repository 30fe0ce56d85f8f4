"""`python -m bench.compare a.json b.json`: two runs side by side.

Matches variants by (case, variant) and prints a Markdown table of both
interquartile means and `b/a` (< 1: faster in b), e.g. the same bench on
CPU and on GPU
(`JAX_PLATFORMS=cuda python -m bench --out gpu`), with two allocators
(`--allocator`), or before and after an operator change. Peer runtimes
always run on the CPU, so on an accelerator compare jaxops rows with jaxops
rows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence


def _load(path: str) -> dict:
  with open(path) as f:
    return json.load(f)


def _env_line(label: str, results: dict) -> str:
  env = results["env"]
  mode = env.get("allocator", {}).get("mode", "system")
  return (
    f"- **{label}**: {env['backend']} ({env['device_kind']}), jax "
    f"{env['jax']}, {env['cpu_count']} CPUs, allocator {mode}, load "
    f"{env['loadavg_start'][0]:.2f}, {env['utc']}"
  )


def _iqms(results: dict) -> dict[tuple[str, str], float]:
  return {
    (case["key"], name): entry["iqm_s"]
    for case in results["cases"]
    for name, entry in case["variants"].items()
  }


def compare(a: dict, b: dict, variants: Sequence[str] | None = None) -> str:
  """The side-by-side Markdown table of runs `a` and `b`."""
  ta, tb = _iqms(a), _iqms(b)
  keys = [k for k in ta if k in tb and (not variants or k[1] in variants)]
  lines = [
    "# bench comparison",
    "",
    _env_line("a", a),
    _env_line("b", b),
    "",
    "| case | variant | a ms | b ms | b/a |",
    "|---|---|---|---|---|",
  ]
  ratios = []
  for case, name in keys:
    ratio = tb[case, name] / ta[case, name]
    ratios.append(ratio)
    lines.append(
      f"| {case} | {name} | {ta[case, name] * 1e3:.4g} | "
      f"{tb[case, name] * 1e3:.4g} | {ratio:.2f} |"
    )
  if ratios:
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    lines += [
      "",
      f"{len(ratios)} matched variants; geometric mean b/a {geomean:.2f}",
    ]
  only = sorted(set(ta) ^ set(tb))
  if only:
    lines += [
      "",
      "In one run only: "
      + ", ".join(f"{c} {v} ({'a' if (c, v) in ta else 'b'})" for c, v in only),
    ]
  return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
    prog="python -m bench.compare", description=__doc__
  )
  parser.add_argument("a", help="results.json of the first run")
  parser.add_argument("b", help="results.json of the second run")
  parser.add_argument(
    "--variants", default="", help="comma-separated variant names to keep"
  )
  args = parser.parse_args(argv)
  keep = [v for v in args.variants.split(",") if v]
  sys.stdout.write(compare(_load(args.a), _load(args.b), keep))
  return 0


if __name__ == "__main__":
  sys.exit(main())
