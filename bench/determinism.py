"""`python -m bench.determinism`: repeated targets, run after run, per device.

For every scatter path whose targets repeat -- ScatterNDUpdate's default and
its reductions, ScatterElementsUpdate's, the gathers' gradients (their
transposes sum the cotangents of repeated reads) -- on float values whose
sum depends on the order, this runs jaxops and the plain JAX formulation
(`.at[]`, `jnp.take` autodiff) several times on each device of the default
backend and on the CPU, and reports per device:

* how many different results jaxops gave (1: deterministic) and the plain
  formulation gave (more than 1: the backend's scatter order varies, e.g.
  GPU atomics);
* whether jaxops equals, bit for bit, the constructed path computed on the
  CPU (`JAXOPS_SCATTER_ORDER=constructed`): the path every platform but CPU
  takes, so on a GPU or TPU this says the backends agree;
* on the CPU, whether jaxops (XLA's serial scatter) equals NumPy's serial
  reference for the sum (`np.add.at`).

docs/semantics.md#repeat-order states the rule this checks; the suite checks
it structurally (tests/test_determinism.py) and on CPU. Writes
`determinism.json` under `--out` and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxops
from jaxops import _order

TARGETS = 64
FEATURES = 16


def _inputs(n: int, dtype: Any, seed: int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  rows = rng.integers(0, TARGETS, n)
  return {
    "data": rng.standard_normal((TARGETS, FEATURES)).astype(dtype),
    "rows": rows[:, None],
    "elements": rng.integers(0, TARGETS, (n, FEATURES)),
    "updates": rng.standard_normal((n, FEATURES)).astype(dtype),
    # Factors near 1, so that long products stay finite.
    "factors": (1 + rng.standard_normal((n, FEATURES)) / 64).astype(dtype),
  }


def _cases(
  x: dict[str, np.ndarray],
) -> dict[str, tuple[Callable, Callable | None, tuple]]:
  """name -> (jaxops fn, plain fn or None, args)."""
  d, r, e, u, f = (
    x["data"],
    x["rows"],
    x["elements"],
    x["updates"],
    x["factors"],
  )
  cases: dict[str, tuple[Callable, Callable | None, tuple]] = {}
  at_nd: dict[str, Callable | None] = {
    "none": lambda d, i, u: d.at[i[:, 0]].set(u),
    "sum": lambda d, i, u: d.at[i[:, 0]].add(u),
    "sub": lambda d, i, u: d.at[i[:, 0]].add(-u),
    "prod": lambda d, i, u: d.at[i[:, 0]].multiply(u),
    "min": lambda d, i, u: d.at[i[:, 0]].min(u),
    "max": lambda d, i, u: d.at[i[:, 0]].max(u),
  }
  for reduction, plain in at_nd.items():
    values = f if reduction == "prod" else u
    cases[f"scatter_nd_update/{reduction}"] = (
      lambda d, i, u, reduction=reduction: jaxops.scatter_nd_update(
        d, i, u, reduction=reduction
      ),
      plain,
      (d, r, values),
    )
  cols = np.arange(FEATURES)
  at_el: dict[str, Callable | None] = {
    "none": lambda d, i, u: d.at[i, cols].set(u),
    "sum": lambda d, i, u: d.at[i, cols].add(u),
    "prod": lambda d, i, u: d.at[i, cols].multiply(u),
    "min": lambda d, i, u: d.at[i, cols].min(u),
    "max": lambda d, i, u: d.at[i, cols].max(u),
    "mean": None,
  }
  for reduction, plain in at_el.items():
    values = f if reduction == "prod" else u
    cases[f"scatter_elements_update/{reduction}"] = (
      lambda d, i, u, reduction=reduction: jaxops.scatter_elements_update(
        d, i, u, axis=0, reduction=reduction
      ),
      plain,
      (d, e, values),
    )

  def vjp(gather: Callable) -> Callable:
    def fn(d, i, ct):
      return jax.vjp(lambda d: gather(d, i), d)[1](ct)[0]

    return fn

  cases["gather_nd/grad"] = (
    vjp(jaxops.gather_nd),
    vjp(lambda d, i: d[i[:, 0]]),
    (d, r, u),
  )
  cases["gather_elements/grad"] = (
    vjp(lambda d, i: jaxops.gather_elements(d, i, axis=0)),
    vjp(lambda d, i: jnp.take_along_axis(d, i, axis=0)),
    (d, e, u),
  )
  cases["gather/grad"] = (
    vjp(lambda d, i: jaxops.gather(d, i[:, 0], axis=0)),
    vjp(lambda d, i: jnp.take(d, i[:, 0], axis=0)),
    (d, r, u),
  )
  return cases


def _digest(x: Any) -> str:
  return hashlib.sha256(np.asarray(x).tobytes()).hexdigest()[:16]


def _runs(fn: Callable, args: tuple, device: Any, repeats: int) -> list[str]:
  placed = jax.device_put(args, device)
  # A fresh function each time: jit's trace cache would keep the path the
  # switch chose at the first trace (it is read when tracing).
  compiled = jax.jit(lambda *a: fn(*a))
  return [
    _digest(jax.block_until_ready(compiled(*placed))) for _ in range(repeats)
  ]


def _serial_sum(x: dict[str, np.ndarray], name: str) -> np.ndarray | None:
  """NumPy's serial reference where it is one call (`np.add.at`)."""
  d, r, u = x["data"].copy(), x["rows"][:, 0], x["updates"]
  if name == "scatter_nd_update/sum":
    np.add.at(d, r, u)
    return d
  if name == "scatter_elements_update/sum":
    np.add.at(d, (x["elements"], np.arange(FEATURES)), u)
    return d
  return None


def run(n: int, dtype: str, repeats: int, seed: int) -> list[dict[str, Any]]:
  x = _inputs(n, np.dtype(dtype), seed)
  cases = _cases(x)
  cpu = jax.devices("cpu")[0]
  devices = list(dict.fromkeys([jax.devices()[0], cpu]))
  rows = []
  for name, (ours, plain, args) in cases.items():
    with _order.forced_constructed():
      reference = _runs(ours, args, cpu, 1)[0]
    serial = _serial_sum(x, name)
    for device in devices:
      start = time.perf_counter()
      mine = _runs(ours, args, device, repeats)
      theirs = _runs(plain, args, device, repeats) if plain else []
      rows.append(
        {
          "case": name,
          "device": f"{device.platform}:{device.device_kind}",
          "path": _path(device),
          "jaxops_distinct": len(set(mine)),
          "plain_distinct": len(set(theirs)) if theirs else None,
          "equals_cpu_constructed": len(set(mine)) == 1
          and mine[0] == reference,
          "equals_numpy_serial": None
          if serial is None
          else len(set(mine)) == 1 and mine[0] == _digest(serial),
          "plain_equals_jaxops": None
          if not theirs
          else set(theirs) == set(mine),
          "seconds": round(time.perf_counter() - start, 2),
        }
      )
  return rows


def _path(device: Any) -> str:
  if _order.constructed_only() or device.platform != "cpu":
    return "constructed"
  return "serial"


def _table(rows: Sequence[dict[str, Any]]) -> str:
  keys = [
    "case",
    "device",
    "path",
    "jaxops_distinct",
    "plain_distinct",
    "equals_cpu_constructed",
    "equals_numpy_serial",
    "plain_equals_jaxops",
  ]
  lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
  for row in rows:
    cells = ["-" if row[k] is None else str(row[k]) for k in keys]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(
    prog="python -m bench.determinism", description=__doc__
  )
  parser.add_argument(
    "--updates", type=int, default=1 << 18, help="updates per case"
  )
  parser.add_argument("--dtype", default="float32")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default="bench/results")
  args = parser.parse_args(argv)
  rows = run(args.updates, args.dtype, args.repeats, args.seed)
  header = (
    f"jax {jax.__version__} | backend {jax.default_backend()} "
    f"({jax.devices()[0].device_kind}) | {platform.node()} | {args.updates} "
    f"updates into {TARGETS} rows of {FEATURES} | {args.dtype} | "
    f"{args.repeats} runs per device"
  )
  print(header)
  print(_table(rows))
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "determinism.json"), "w") as f:
    json.dump({"header": header, "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
