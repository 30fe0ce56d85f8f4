"""Markdown tables and PNG plots from a results dict (see bench/cli.py).

Ratios are time/time, so < 1 means the first-named side is faster:
`jaxops/peer` < 1 is jaxops ahead of the fastest comparable peer (OpenVINO,
onnxruntime or PyTorch; in place included for a donated call);
`jaxops/floor` is how many times the memory-traffic floor the call takes
(>= 1 expected); `plain/jaxops` for fwd+bwd is jaxops's speedup over JAX's
autodiff of the plain formulation (> 1 is jaxops ahead). `evaluate_bars`
evaluates the bars each operator plug-in declares (bench/bars.py).
"""

from __future__ import annotations

import math
import os
from typing import Any

from bench import bars, ops
from bench.bars import iqm as _iqm
from bench.bars import ms as _ms

_TABLE_TIERS = ("ir", "large")


def _ratio(a: float | None, b: float | None) -> str:
  if a is None or b is None or b == 0:
    return "-"
  return f"{a / b:.2f}"


def floors(case: dict, variant: str) -> tuple[float, float]:
  """(traffic floor, cache-line floor) in seconds for `variant`.

  Out-of-place variants of an op that can run in place (scatter without
  donation) also pay the data copy.
  """
  entry = case["variants"][variant]
  extra = 0.0 if entry.get("donated") else case.get("copy_s", 0.0)
  return case["floor_s"] + extra, case["line_floor_s"] + extra


def evaluate_bars(results: dict) -> list[dict[str, Any]]:
  """Every operator's bars (its plug-in's `BARS`) on `results`."""
  by_op: dict[str, list[dict]] = {}
  for case in results["cases"]:
    by_op.setdefault(case["op"], []).append(case)
  mode = results["env"].get("allocator", {}).get("mode")
  out = []
  for op, cases in by_op.items():
    for bar in ops.load(op).BARS:
      out.append({**bar.evaluate(op, cases), "allocator": mode})
  return out


def _jax_compile_max(case: dict) -> float | None:
  return max(
    (
      v["compile_s"]
      for v in case["variants"].values()
      if not v.get("peer") and v.get("compile_s") is not None
    ),
    default=None,
  )


def forward_rows(results: dict) -> list[dict[str, Any]]:
  """One row per (IR or large case, jaxops forward variant)."""
  rows = []
  for case in results["cases"]:
    if case["tier"] not in _TABLE_TIERS:
      continue
    for name, entry in case["variants"].items():
      if entry["group"] != "fwd" or not name.startswith("jaxops"):
        continue
      donated = entry["donated"]
      peer_name, peer = bars.fastest_peer(case, name)
      floor, line_floor = floors(case, name)
      rows.append(
        {
          "case": case["key"],
          "variant": name,
          "jaxops_s": entry["iqm_s"],
          "plain_s": _iqm(case, "plain.donated" if donated else "plain"),
          "openvino_s": _iqm(case, "openvino"),
          "onnxruntime_s": _iqm(case, "onnxruntime"),
          "torch_s": _iqm(case, "torch.inplace" if donated else "torch"),
          "best_peer": peer_name,
          "best_peer_s": peer,
          "floor_s": floor,
          "line_floor_s": line_floor,
          "compile_max_s": _jax_compile_max(case),
          "peer_threads": case.get("peer_threads"),
          "jaxops_over_peer": entry["iqm_s"] / peer if peer else None,
          "jaxops_over_line_floor": entry["iqm_s"] / line_floor,
        }
      )
  return rows


def grad_rows(results: dict) -> list[dict[str, Any]]:
  rows = []
  for case in results["cases"]:
    if case["tier"] not in _TABLE_TIERS:
      continue
    plain, torch = _iqm(case, "plain.grad"), _iqm(case, "torch.grad")
    convention = case["variants"].get("torch.grad", {}).get("convention")
    for name, entry in case["variants"].items():
      if entry["group"] == "fwdbwd" and name.startswith("jaxops"):
        rows.append(
          {
            "case": case["key"],
            "variant": name,
            "jaxops_s": entry["iqm_s"],
            "plain_s": plain,
            "torch_s": torch,
            "torch_convention": convention,
            "speedup": plain / entry["iqm_s"] if plain else None,
          }
        )
  return rows


def _header(results: dict) -> list[str]:
  env, bw = results["env"], results["bandwidth"]
  alloc = env.get("allocator", {})
  mode = alloc.get("mode", "system")
  detail = ", ".join(
    f"{k}={alloc[k]}"
    for k in ("LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES")
    if alloc.get(k)
  )
  return [
    "# jaxops benchmark",
    "",
    f"{env['utc']} | backend **{env['backend']}** ({env['device_kind']}) | "
    f"jax {env['jax']} / jaxlib {env['jaxlib']} | x64 "
    f"{'on' if env.get('x64') else 'off'} | {env['cpu_count']} CPUs "
    f"({env['cpu_model']}) | allocator **{mode}**"
    + (f" ({detail})" if detail else "")
    + f" | repeated targets: **{env.get('scatter_order', 'constructed')}**"
    + " | peers: "
    + ", ".join(f"{k} {v}" for k, v in env["peers"].items())
    + f" ({env['peer_threads']} threads) | load average "
    f"{env['loadavg_start'][0]:.2f} -> "
    f"{env.get('loadavg_end', [math.nan])[0]:.2f}",
    "",
    f"Copy bandwidth: host np.copyto {bw['host_copyto_Bps'] / 1e9:.2f} GB/s, "
    f"jitted device copy {bw['device_copy_Bps'] / 1e9:.2f} GB/s (read + "
    f"write bytes); floors use `{bw['used']}`. Times are interquartile "
    "means in ms (the mean of the middle half of the timed calls).",
    "",
  ]


def _forward_table(results: dict) -> list[str]:
  lines = [
    "## Forward",
    "",
    "Donated rows compare with every peer call, PyTorch's in-place one "
    "included (its column then shows `torch.inplace`); out-of-place rows "
    "with the out-of-place peer calls. `*`: peers on one thread (duplicate "
    "indices and reductions, which they apply in order only there), left "
    "out of the peer bars but the reductions' own; the onnxruntime column is "
    "its one-thread call, and jaxops/best peer counts `onnxruntime.threads` "
    "(the run's threads, in All variants) only where its result is right.",
    "",
    "| case | jaxops variant | jaxops | plain | OpenVINO | onnxruntime | "
    "PyTorch | line floor | jaxops/best peer | jaxops/line floor | "
    "max compile |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in forward_rows(results):
    star = "*" if r["peer_threads"] else ""
    lines.append(
      f"| {r['case']}{star} | {r['variant']} | {_ms(r['jaxops_s'])} | "
      f"{_ms(r['plain_s'])} | {_ms(r['openvino_s'])} | "
      f"{_ms(r['onnxruntime_s'])} | {_ms(r['torch_s'])} | "
      f"{_ms(r['line_floor_s'])} | "
      f"{_ratio(r['jaxops_s'], r['best_peer_s'])} | "
      f"{_ratio(r['jaxops_s'], r['line_floor_s'])} | "
      f"{_ms(r['compile_max_s'])} |"
    )
  return lines


def _grad_table(results: dict) -> list[str]:
  grads = grad_rows(results)
  if not grads:
    return []
  lines = [
    "",
    "## Forward + backward (value_and_grad)",
    "",
    "| case | jaxops variant | jaxops | plain autodiff | PyTorch "
    "autograd | plain/jaxops | PyTorch/jaxops |",
    "|---|---|---|---|---|---|---|",
  ]
  for r in grads:
    mark = " †" if r.get("torch_convention") else ""
    lines.append(
      f"| {r['case']} | {r['variant']} | {_ms(r['jaxops_s'])} | "
      f"{_ms(r['plain_s'])} | {_ms(r['torch_s'])}{mark} | "
      f"{_ratio(r['plain_s'], r['jaxops_s'])} | "
      f"{_ratio(r['torch_s'], r['jaxops_s'])} |"
    )
  rules = sorted(
    {r["torch_convention"]["rule"] for r in grads if r.get("torch_convention")}
  )
  if rules:
    lines.append("")
  lines += [
    f"† PyTorch's own convention: {rule}; compared bit for bit everywhere else."
    for rule in rules
  ]
  return lines


def _vmap_table(results: dict) -> list[str]:
  cases = [c for c in results["cases"] if c["tier"] == "vmap"]
  if not cases:
    return []
  lines = [
    "",
    "## vmap",
    "",
    "`jax.vmap` of the jaxops call vs the equivalent single batched "
    "call (`batched`) and a Python loop of jitted per-example calls "
    "(`loop`). Arguments: which carry the batch.",
    "",
    "| case | arguments | batch | vmap | batched | loop | "
    "vmap/batched | loop/vmap | vmap donated / batched donated | "
    "vmap fwd+bwd / batched fwd+bwd |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for c in cases:
    t = lambda n, c=c: _iqm(c, n)
    axes = ", ".join("b" if a == 0 else "-" for a in c.get("in_axes") or [])
    lines.append(
      f"| {c['key']} | {axes} | {c.get('batch')} | {_ms(t('jaxops'))} | "
      f"{_ms(t('batched'))} | {_ms(t('loop'))} | "
      f"{_ratio(t('jaxops'), t('batched'))} | "
      f"{_ratio(t('loop'), t('jaxops'))} | "
      f"{_ratio(t('jaxops.donated'), t('batched.donated'))} | "
      f"{_ratio(t('jaxops.grad'), t('batched.grad'))} |"
    )
  return lines


_DEFAULT_COSTS = (
  ("jaxops", "jaxops_clip", "mode='fill' / mode='clip'"),
  ("jaxops", "jaxops_unique", "default / unique_indices=True"),
  (
    "jaxops.donated",
    "jaxops_unique.donated",
    "default / unique_indices=True, donated",
  ),
)


def _defaults_table(results: dict) -> list[str]:
  rows = []
  for c in results["cases"]:
    for a, b, what in _DEFAULT_COSTS:
      ta, tb = _iqm(c, a), _iqm(c, b)
      if ta is not None and tb is not None:
        rows.append(
          f"| {c['key']} | {what} | {_ms(ta)} | {_ms(tb)} | {_ratio(ta, tb)} |"
        )
  if not rows:
    return []
  return [
    "",
    "## Cost of the safe defaults",
    "",
    "The default out-of-range handling (gathers: fill) and duplicate "
    "resolution (ScatterNDUpdate) against the cheaper opt-outs, on "
    "in-range, unique indices where both give the same bits. "
    "ScatterNDUpdate's floor: on XLA:CPU an exact, order-independent "
    "repeat test costs at least 1.35x a donated element update "
    "(docs/design.md#safe-defaults-decided); sorted indices skip it.",
    "",
    "| case | ratio | default | opt-out | default/opt-out |",
    "|---|---|---|---|---|",
  ] + rows


def _bars_section(results: dict) -> list[str]:
  mode = results["env"].get("allocator", {}).get("mode", "system")
  lines = ["", f"## Bars (allocator: {mode})", ""]
  for v in results.get("bars", []):
    verdict = {True: "met", False: "MISSED", None: "not evaluated"}[v["met"]]
    lines.append(f"- {v['op']}: {v['bar']}: **{verdict}**; {v['summary']}")
  return lines


def markdown(results: dict) -> str:
  lines = _header(results) + _forward_table(results) + _grad_table(results)
  lines += _vmap_table(results) + _defaults_table(results)
  lines += sweep_tables(results)
  lines += _bars_section(results)
  lines += [
    "",
    "## All variants",
    "",
    "| case | variant | compile ms | IQM ms | p10-p90 ms | reps |",
    "|---|---|---|---|---|---|",
  ]
  for case in results["cases"]:
    for name, e in case["variants"].items():
      note = ""
      if e.get("donated") and "donation_used" in e:
        note = " (donated)" if e.get("donation_used") else " (NOT donated)"
      if "wrong" in e:
        verdict = f"WRONG: {e['wrong']}" if e["wrong"] else "right"
        note = f" ({e['threads']} threads, {verdict})"
      if "convention" in e:
        c = e["convention"]
        note = (
          f" (its convention: {c['rule']}; {c['differ']} of the "
          f"{c['left_out']} elements it covers differ, the rest bit-exact)"
        )
      lines.append(
        f"| {case['key']} | {name}{note} | {_ms(e['compile_s'])} | "
        f"{_ms(e['iqm_s'])} | {_ms(e['p10_s'])}-{_ms(e['p90_s'])} | "
        f"{e['reps']} |"
      )
    for name, why in case["skipped"].items():
      lines.append(f"| {case['key']} | {name} | skipped: {why} | | | |")
  n_checks = sum(len(c["checks"]) for c in results["cases"])
  lines += [
    "",
    f"Bit-exactness: {n_checks} output comparisons across "
    f"{len(results['cases'])} cases, all equal"
    if not results.get("bit_exact_failure")
    else f"BIT-EXACTNESS FAILURE: {results['bit_exact_failure']}",
  ]
  lines.append(f"Wall time: {results.get('wall_s', 0):.0f} s")
  return "\n".join(lines) + "\n"


def _sweeps(results: dict) -> dict[tuple[str, str], list[dict]]:
  sweeps: dict[tuple[str, str], list[dict]] = {}
  for case in results["cases"]:
    if case["tier"] == "sweep":
      sweeps.setdefault((case["op"], case["sweep"]), []).append(case)
  return sweeps


def sweep_tables(results: dict) -> list[str]:
  lines = []
  for (op, sweep), cases in _sweeps(results).items():
    cases = sorted(cases, key=lambda c: c["size"])
    names = list(dict.fromkeys(n for c in cases for n in c["variants"]))
    lines += [
      "",
      f"## Sweep {op} over {sweep} (ms)",
      "",
      "| variant | "
      + " | ".join(str(c["size"]) for c in cases)
      + " | last/first |",
      "|---|" + "---|" * (len(cases) + 1),
    ]
    for name in names:
      times = [_iqm(c, name) for c in cases]
      lines.append(
        f"| {name} | "
        + " | ".join(_ms(t) for t in times)
        + f" | {_ratio(times[-1], times[0])} |"
      )
    line = [c["line_floor_s"] for c in cases]
    lines.append(
      "| line floor (donated) | "
      + " | ".join(_ms(t) for t in line)
      + f" | {_ratio(line[-1], line[0])} |"
    )
  return lines


def _save(fig, path: str) -> str:
  import matplotlib.pyplot as plt

  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def plots(results: dict, out_dir: str) -> list[str]:
  """Per-op bar charts (log time) and log-log sweep plots with floors."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  paths = []
  by_op: dict[str, list[dict]] = {}
  for case in results["cases"]:
    if case["tier"] in _TABLE_TIERS:
      by_op.setdefault(case["op"], []).append(case)
  for op, cases in by_op.items():
    fig, axes = plt.subplots(
      1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 2]}
    )
    for ax, group, title in (
      (axes[0], "fwd", "forward"),
      (axes[1], "fwdbwd", "forward + backward"),
    ):
      names = list(
        dict.fromkeys(
          n
          for c in cases
          for n, e in c["variants"].items()
          if e["group"] == group
        )
      )
      width = 0.8 / max(1, len(names))
      for j, name in enumerate(names):
        xs = [
          i + (j - (len(names) - 1) / 2) * width
          for i, c in enumerate(cases)
          if name in c["variants"]
        ]
        ys = [
          c["variants"][name]["iqm_s"] * 1e3
          for c in cases
          if name in c["variants"]
        ]
        ax.bar(xs, ys, width, label=name)
      if group == "fwd":
        for i, c in enumerate(cases):
          ax.hlines(
            c["line_floor_s"] * 1e3,
            i - 0.45,
            i + 0.45,
            colors="k",
            linestyles="--",
            label="line floor" if i == 0 else None,
          )
      ax.set_yscale("log")
      ax.set_xticks(range(len(cases)), [c["name"] for c in cases])
      ax.set_ylabel("IQM time (ms)")
      ax.set_title(f"{op}: {title}")
      if names:
        ax.legend(fontsize=7)
    paths.append(_save(fig, os.path.join(out_dir, f"{op}_bars.png")))
  sweeps = _sweeps(results)
  for op in dict.fromkeys(op for op, _ in sweeps):
    mine = [(s, c) for (o, s), c in sweeps.items() if o == op]
    fig, axes = plt.subplots(
      1, len(mine), figsize=(6 * len(mine), 4.5), squeeze=False
    )
    for ax, (sweep, cases) in zip(axes[0], mine):
      cases = sorted(cases, key=lambda c: c["size"])
      sizes = [c["size"] for c in cases]
      names = list(dict.fromkeys(n for c in cases for n in c["variants"]))
      for name in names:
        pts = [
          (c["size"], c["variants"][name]["iqm_s"] * 1e3)
          for c in cases
          if name in c["variants"]
        ]
        ax.plot(*zip(*pts), marker="o", label=name)
      ax.plot(
        sizes,
        [c["line_floor_s"] * 1e3 for c in cases],
        "k--",
        label="line floor (donated)",
      )
      ax.plot(
        sizes,
        [c["floor_s"] * 1e3 for c in cases],
        "k:",
        label="traffic floor (donated)",
      )
      ax.set_xscale("log")
      ax.set_yscale("log")
      ax.set_xlabel(sweep)
      ax.set_ylabel("IQM time (ms)")
      ax.set_title(f"{op}: time vs {sweep}")
      ax.legend(fontsize=7)
    paths.append(_save(fig, os.path.join(out_dir, f"{op}_sweep.png")))
  return paths
