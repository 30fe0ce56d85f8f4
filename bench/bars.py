"""Performance bars: what an operator promises, checked on a run's results.

Each operator plug-in declares its own bars (`BARS` in bench/ops/<op>.py)
with the kinds below; `bench.report.evaluate_bars` evaluates them on the
results dict of one run (one allocator mode) and records every verdict in
`results.json` under `bars`, so that a later tool can read them. A bar is
met when every case it applies to meets it, missed when one does not, and
not evaluated when the run has no case with the variants it compares (e.g.
`--variants` left them out, or PyTorch is not installed).

Times are interquartile means (`iqm_s`, bench/harness.py). Peers are
compared like for like: an out-of-place jaxops variant with the
out-of-place peer calls (`openvino`, `onnxruntime`, `torch`), a donated one
with every peer call including PyTorch's in-place one (`torch.inplace`).
Cases whose peers run with a thread count other than the run's
(`peer_threads` in the JSON: the duplicate-index ScatterNDUpdate cases and
the scatter reductions, where the peers apply duplicates in order only on
one thread) are left out of the peer bars, except those declared with
`one_thread=True` (the reductions' bar: at or ahead of the fastest peer
whose result is right). There `onnxruntime.threads`, onnxruntime on the
run's thread count, counts as a peer only when its output was right on
every case of the bar (`wrong` None in the JSON): on the inputs timed and,
where those hide the order of a sum, on random floats compared with the
same runtime on one thread (`harness.order_probe`).

`python -m bench.bars a.json b.json ...` prints the verdicts of several runs
(e.g. one per allocator mode) side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import sys
from collections.abc import Sequence
from typing import Any

PEERS_OUT_OF_PLACE = ("openvino", "onnxruntime", "onnxruntime.threads", "torch")
PEERS_IN_PLACE = ("torch.inplace",)
PEERS = PEERS_OUT_OF_PLACE + PEERS_IN_PLACE


def iqm(case: dict, name: str) -> float | None:
  """The interquartile mean in seconds of variant `name` in `case`, None if
  it did not run."""
  entry = case["variants"].get(name)
  return entry["iqm_s"] if entry else None


def comparable_peers(case: dict, variant: str) -> tuple[str, ...]:
  """The peer variants a jaxops `variant` of `case` is compared with."""
  donated = case["variants"].get(variant, {}).get("donated", False)
  return PEERS if donated else PEERS_OUT_OF_PLACE


def fastest_peer(
  case: dict, variant: str = "jaxops", left_out: frozenset[str] = frozenset()
) -> tuple[str | None, float | None]:
  """(name, IQM) of the fastest peer comparable to `variant` whose output
  was right, other than those `left_out`."""
  times = [
    (p, iqm(case, p))
    for p in comparable_peers(case, variant)
    if p not in left_out
    and iqm(case, p) is not None
    and not case["variants"][p].get("wrong")
  ]
  return min(times, key=lambda t: t[1]) if times else (None, None)


def ms(seconds: float | None) -> str:
  if seconds is None:
    return "-"
  value = seconds * 1e3
  return f"{value:.3g}" if value < 100 else f"{value:.0f}"


# How close to the reference an "at or ahead" bar's paired ratio must be
# known to call a call that measured behind a tie (`tie`).
TIE_RESOLUTION = 1.05


def tie(case: dict, variant: str, reference: str) -> dict | None:
  """The paired ratio of `variant` over `reference` in `case` if it makes
  them a tie: its 95% interval reaches 1.0 (the run cannot tell `variant`
  slower) and stays within `TIE_RESOLUTION` (it could tell a slower one)."""
  paired = case.get("paired", {}).get(f"{variant} / {reference}")
  if paired and paired["lo"] <= 1.0 and paired["hi"] <= TIE_RESOLUTION:
    return paired
  return None


@dataclasses.dataclass
class Check:
  """One case (and variant) a bar looked at."""

  case: str
  variant: str
  value: float
  met: bool
  detail: str
  # Met as a tie (`tie`): measured behind, by less than the run resolves.
  tie: bool = False


def _at_most_check(
  case: dict,
  variant: str,
  reference: str,
  value: float,
  at_most: float,
  detail: str,
) -> Check:
  """The check of `variant`'s ratio `value` to `reference` against
  `at_most`, met as a tie (`tie`) where the bar is "at or ahead" and the
  call measured behind; `detail` is closed here, the tie's interval in it."""
  behind_at_or_ahead = value > at_most and at_most == 1.0
  paired = tie(case, variant, reference) if behind_at_or_ahead else None
  if paired:
    detail += (
      f"; a tie: round by round {paired['median']:.3f}x, 95% interval "
      f"{paired['lo']:.3f}-{paired['hi']:.3f}x over {paired['n']} rounds"
    )
  met = value <= at_most or paired is not None
  return Check(
    case["key"], variant, value, met, detail + ")", paired is not None
  )


class Bar:
  """A performance bar; subclasses say what it compares (`checks`)."""

  name: str
  # The value each check reports, e.g. "x the fastest peer": for the summary.
  unit: str = "x"
  # Whether a larger value is worse (ratios) or better (speed-ups).
  lower_is_better: bool = True

  def checks(self, cases: list[dict]) -> list[Check]:
    raise NotImplementedError

  def tie_variants(self, case: dict) -> frozenset[str]:
    """The variants of `case` this bar may call a tie (`tie`): those that
    need the rounds to resolve one (`measure`'s `min_reps`)."""
    return frozenset()

  def evaluate(self, op: str, cases: list[dict]) -> dict[str, Any]:
    """The verdict on `cases` (one operator's cases of one run), as a dict."""
    checks = self.checks(cases)
    verdict = {
      "op": op,
      "bar": self.name,
      "checks": [dataclasses.asdict(c) for c in checks],
    }
    if not checks:
      return {
        **verdict,
        "met": None,
        "summary": "no case of this run has the variants it compares",
      }
    worst = (max if self.lower_is_better else min)(
      checks, key=lambda c: c.value
    )
    missed = [c for c in checks if not c.met]
    summary = (
      f"worst {worst.case} {worst.variant}: {worst.detail}; "
      f"{len(checks)} check{'s' if len(checks) > 1 else ''}"
    )
    if missed:
      summary += "; missed on " + ", ".join(
        f"{c.case} {c.variant} ({c.value:.2f}{self.unit})" for c in missed
      )
    ties = [c for c in checks if c.tie]
    if ties:
      summary += "; ties on " + ", ".join(
        f"{c.case} {c.variant} ({c.value:.2f}{self.unit})" for c in ties
      )
    return {**verdict, "met": not missed, "summary": summary}


def _tier_ok(case: dict, tiers: Sequence[str] | None) -> bool:
  return tiers is None or case["tier"] in tiers


@dataclasses.dataclass
class Ratio(Bar):
  """`variant` time over `reference` time, for each (variant, reference) pair.

  With `at_most`, met when the ratio is at most that; with `at_least`, the
  bar is a speed-up (`reference` time over `variant` time) that must reach
  it. `unique_only` keeps the cases whose index tuples are distinct;
  `cases` are glob patterns on the case name.
  """

  name: str
  pairs: tuple[tuple[str, str], ...]
  at_most: float | None = None
  at_least: float | None = None
  tiers: tuple[str, ...] | None = None
  unique_only: bool = False
  cases: tuple[str, ...] = ("*",)

  def __post_init__(self):
    assert (self.at_most is None) != (self.at_least is None), self.name
    self.lower_is_better = self.at_least is None

  def applies(self, case: dict) -> bool:
    return (
      _tier_ok(case, self.tiers)
      and not (self.unique_only and not case.get("unique", True))
      and any(fnmatch.fnmatch(case["name"], p) for p in self.cases)
    )

  def tie_variants(self, case):
    if self.at_most != 1.0 or not self.applies(case):
      return frozenset()
    return frozenset(name for pair in self.pairs for name in pair)

  def checks(self, cases):
    out = []
    for case in cases:
      if not self.applies(case):
        continue
      for variant, reference in self.pairs:
        t, ref = iqm(case, variant), iqm(case, reference)
        if t is None or ref is None:
          continue
        if self.at_least is None:
          value = t / ref
          detail = (
            f"{value:.2f}x {reference} ({ms(t)} vs {ms(ref)} ms, "
            f"bar <= {self.at_most}x"
          )
          out.append(
            _at_most_check(
              case, variant, reference, value, self.at_most, detail
            )
          )
        else:
          value = ref / t
          detail = (
            f"{value:.2f}x faster than {reference} ({ms(t)} vs "
            f"{ms(ref)} ms, bar >= {self.at_least}x)"
          )
          out.append(
            Check(case["key"], variant, value, value >= self.at_least, detail)
          )
    return out


@dataclasses.dataclass
class VsPeers(Bar):
  """`variants` time over the fastest comparable peer's, at most `at_most`.

  Applies to the cases of `tiers` (all with peers if None) whose name
  matches a glob of `cases`, where the jaxops variant or that peer takes
  more than `min_s` (all if None): with `one_thread`, the cases whose peers
  run on their own thread count (`peer_threads`), else the others. A peer
  counts only if its output was right on every case the bar applies to:
  one that races is no peer where it happened not to.
  """

  name: str
  variants: tuple[str, ...] = ("jaxops",)
  at_most: float = 1.0
  tiers: tuple[str, ...] | None = None
  min_s: float | None = None
  one_thread: bool = False
  cases: tuple[str, ...] = ("*",)

  def checks(self, cases):
    cases = [
      case
      for case in cases
      if _tier_ok(case, self.tiers)
      and (case.get("peer_threads") is not None) == self.one_thread
      and any(fnmatch.fnmatch(case["name"], p) for p in self.cases)
    ]
    wrong = {
      (peer, case["name"])
      for case in cases
      for peer, entry in case["variants"].items()
      if entry.get("wrong")
    }
    left_out = frozenset(peer for peer, _ in wrong)
    out = []
    for case in cases:
      for variant in self.variants:
        t = iqm(case, variant)
        peer, peer_t = fastest_peer(case, variant, left_out)
        if (
          t is None
          or peer_t is None
          or (self.min_s is not None and max(t, peer_t) <= self.min_s)
        ):
          continue
        value = t / peer_t
        not_peers = "".join(
          f"; {p} is no peer: wrong on "
          + ", ".join(sorted(c for q, c in wrong if q == p))
          for p in sorted(left_out)
          if iqm(case, p) is not None and iqm(case, p) < peer_t
        )
        detail = (
          f"{value:.2f}x {peer} ({ms(t)} vs {ms(peer_t)} ms, "
          f"bar <= {self.at_most}x{not_peers}"
        )
        out.append(
          _at_most_check(case, variant, peer, value, self.at_most, detail)
        )
    return out


@dataclasses.dataclass
class Compile(Bar):
  """Compile time of every JAX variant below `limit_s`.

  The time is the smaller of the wall time and the process's CPU time spent
  compiling: on a loaded machine the wall time grows with the other
  processes' load, while the CPU time does not (and where XLA compiles on
  several threads at once, the wall time is the smaller).
  """

  name: str
  limit_s: float = 2.0
  unit: str = " s"

  def checks(self, cases):
    out = []
    for case in cases:
      for variant, entry in case["variants"].items():
        if variant in PEERS or entry.get("compile_s") is None:
          continue
        wall, cpu = entry["compile_s"], entry.get("compile_cpu_s")
        value = wall if cpu is None else min(wall, cpu)
        out.append(
          Check(
            case["key"],
            variant,
            value,
            value < self.limit_s,
            f"{value:.2f} s (wall {wall:.2f} s; bar < {self.limit_s} s)",
          )
        )
    return out


@dataclasses.dataclass
class DonatedGrowth(Bar):
  """Donated time grows with the number of updates, not the data size.

  Reads two sweeps of the operator: `updates` (data fixed) and `data` (the
  number of updates fixed). Met when the largest data point takes less than
  half one copy of its data (no pass over data) and the time grows more over
  the updates sweep than over the data sweep.
  """

  name: str
  variants: tuple[str, ...]
  updates: str = "updates"
  data: str = "data_elements"
  unit: str = "x"

  def checks(self, cases):
    sweeps = {
      s: sorted(
        (c for c in cases if c.get("sweep") == s), key=lambda c: c["size"]
      )
      for s in (self.updates, self.data)
    }
    out = []
    for name in self.variants:
      times = {s: [iqm(c, name) for c in cs] for s, cs in sweeps.items()}
      if any(len(t) < 2 or None in t for t in times.values()):
        continue
      grow = {s: t[-1] / t[0] for s, t in times.items()}
      span = {s: cs[-1]["size"] / cs[0]["size"] for s, cs in sweeps.items()}
      largest = sweeps[self.data][-1]
      # A pass over data would cost at least the data copy of the largest
      # point; random updates into a larger array still get slower (cache and
      # TLB misses), which is not a pass over data.
      no_data_pass = times[self.data][-1] < 0.5 * largest["copy_s"]
      ok = no_data_pass and grow[self.updates] > grow[self.data]
      out.append(
        Check(
          f"{largest['op']}/sweeps",
          name,
          grow[self.data],
          ok,
          f"{span[self.updates]:.0f}x updates -> {grow[self.updates]:.1f}x "
          f"time; {span[self.data]:.0f}x data at fixed updates -> "
          f"{grow[self.data]:.1f}x time, largest {ms(times[self.data][-1])} "
          f"ms vs {ms(largest['copy_s'])} ms for one copy of its data",
        )
      )
    return out


def peer_bars(variants: tuple[str, ...] = ("jaxops",)) -> tuple[Bar, ...]:
  """The peer bars every operator declares: at or ahead of the fastest peer
  where a call takes more than 1 ms, within 1.5x on the IR examples."""
  return (
    VsPeers(
      "forward at or ahead of the fastest peer (calls above 1 ms)",
      variants,
      min_s=1e-3,
    ),
    VsPeers(
      "IR-example forward within 1.5x of the fastest peer",
      variants,
      at_most=1.5,
      tiers=("ir",),
    ),
  )


def reduction_peer_bar(cases: tuple[str, ...] = ("*",)) -> VsPeers:
  """The scatter reductions' peer bar: forward at or ahead of the fastest
  peer whose result is right, on the large cases `cases`."""
  return VsPeers(
    "reduction forward at or ahead of the fastest peer whose result is "
    "right (large cases; peers on one thread, onnxruntime also on the run's "
    "threads)",
    tiers=("large",),
    one_thread=True,
    cases=cases,
  )


def vmap_bar(
  equivalent: str, pairs: tuple[tuple[str, str], ...] | None = None
) -> Ratio:
  """`jax.vmap` of the operator within 1.25x of `equivalent`, the single
  call that does the batched work (variant `batched`)."""
  return Ratio(
    f"vmap within 1.25x of {equivalent}",
    pairs or (("jaxops", "batched"), ("jaxops.grad", "batched.grad")),
    at_most=1.25,
    tiers=("vmap",),
  )


GRAD_VS_PLAIN = Ratio(
  "fwd+bwd at or ahead of plain autodiff",
  (("jaxops.grad", "plain.grad"),),
  at_most=1.0,
)


FILL_VS_CLIP = Ratio(
  "mode='fill' (default) within 1.15x of mode='clip'",
  (("jaxops", "jaxops_clip"),),
  at_most=1.15,
)


# The bars every gather declares first.
GATHER_BARS = (*peer_bars(), FILL_VS_CLIP, GRAD_VS_PLAIN)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
    prog="python -m bench.bars",
    description="The bar verdicts of several runs side by side.",
  )
  parser.add_argument("results", nargs="+", help="results.json files")
  args = parser.parse_args(argv)
  runs = []
  for path in args.results:
    with open(path) as f:
      runs.append(json.load(f))
  labels = [
    f"{r['env'].get('allocator', {}).get('mode', '?')} ({p})"
    for r, p in zip(runs, args.results)
  ]
  keys = list(
    dict.fromkeys((v["op"], v["bar"]) for r in runs for v in r.get("bars", []))
  )
  lines = [
    "| operator | bar | " + " | ".join(labels) + " |",
    "|---|---|" + "---|" * len(runs),
  ]
  for op, bar in keys:
    cells = []
    for r in runs:
      v = next(
        (v for v in r.get("bars", []) if (v["op"], v["bar"]) == (op, bar)), None
      )
      cells.append(
        "-"
        if v is None or v["met"] is None
        else "met"
        if v["met"]
        else "MISSED"
      )
    lines.append(f"| {op} | {bar} | " + " | ".join(cells) + " |")
  sys.stdout.write("\n".join(lines) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
