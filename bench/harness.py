"""Cases, runners, timing and the bit-exactness gate of the benchmark.

A `Case` is one operator call at fixed shapes: a seeded input generator, the
JAX formulations to compare (`jaxops`, the plain-JAX one, `jaxops_clip`,
`jaxops_unique`, `batched`, ...), the peer-runtime builders and the bytes the
call must move. `bench.cli.plan_variants` turns a case into the variants that
get timed; this module turns a variant into a `Runner` (`jax_runner`,
`loop_runner`), checks that every variant of a group gives the same bits
(`check_bit_exact`) and times them (`measure`). It imports nothing else from
`bench`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

CACHE_LINE = 64


class BitExactError(AssertionError):
  """Two variants of one case disagree; the benchmark refuses to time them."""


@dataclasses.dataclass
class Traffic:
  """Bytes one call must move, for the memory-traffic floors.

  Attributes:
    streamed: bytes read or written sequentially (indices, updates, output).
    random_useful: bytes of `data` the random accesses need.
    random_lines: bytes of the 64-byte cache lines those accesses touch.
    copy: extra bytes (read + write) a non-donated, out-of-place call moves.
  """

  streamed: int
  random_useful: int = 0
  random_lines: int = 0
  copy: int = 0

  @classmethod
  def random(
    cls,
    streamed: int,
    accesses: int,
    access_bytes: int,
    cap: int,
    copy: int = 0,
  ) -> Traffic:
    """`accesses` independent random accesses of `access_bytes` each.

    Both random terms are capped at `cap`, the bytes of data the accesses can
    reach: touching every line once is always enough.
    """
    lines = math.ceil(access_bytes / CACHE_LINE) * CACHE_LINE
    return cls(
      streamed,
      min(accesses * access_bytes, cap),
      min(accesses * lines, cap),
      copy,
    )

  @classmethod
  def indexed(
    cls,
    index_elems: int,
    accesses: int,
    access_elems: int,
    data_elems: int,
    copy_data: bool = False,
  ) -> Traffic:
    """The call of an indexing operator on float32 data (`data_elems` in
    all) with `index_elems` int32 indices: `accesses` random accesses of
    `access_elems` contiguous elements each, which the output or the
    updates stream besides the indices. `copy_data`: an out-of-place call
    also reads and writes all of data.
    """
    return cls.random(
      streamed=4 * index_elems + 4 * accesses * access_elems,
      accesses=accesses,
      access_bytes=4 * access_elems,
      cap=4 * data_elems,
      copy=8 * data_elems if copy_data else 0,
    )

  def floor_bytes(self, donated: bool = True) -> int:
    """Bytes that must move at all: streamed + useful random bytes."""
    return self.streamed + self.random_useful + (0 if donated else self.copy)

  def line_floor_bytes(self, donated: bool = True) -> int:
    """As `floor_bytes`, but a random access moves whole 64-byte lines."""
    return self.streamed + self.random_lines + (0 if donated else self.copy)


@dataclasses.dataclass
class Case:
  """One operator call at fixed shapes.

  `forms` maps a formulation name (`jaxops`, `plain`, ...) to a function of
  the JAX arguments (static attributes closed over); `jaxops` comes first
  and is the reference every other forward variant must match bit for bit.
  `openvino(*params)` builds the OpenVINO node from one Parameter per input;
  `onnx(inputs)` returns an ONNX ModelProto whose inputs are x0, x1, ... and
  output y; `torch(*tensors)` is the PyTorch formulation (indices as int64
  tensors) and `torch_inplace(*tensors)` its in-place form, which writes into
  `tensors[donate_argnum]`. `loop` is, for a vmap case, the per-example
  function a Python loop of jitted calls runs, with `in_axes` saying which
  arguments carry the batch (0) and which are shared (None).
  """

  op: str
  name: str
  tier: str  # "ir" (the spec's layer shapes), "large", "sweep" or "vmap"
  shapes: str
  make_inputs: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
  forms: dict[str, Callable[..., jax.Array]]
  diff_argnums: tuple[int, ...]
  traffic: Traffic
  openvino: Callable[..., Any] | None = None
  onnx: Callable[[Sequence[np.ndarray]], Any] | None = None
  torch: Callable[..., Any] | None = None
  torch_inplace: Callable[..., Any] | None = None
  donate_argnum: int | None = None
  sweep: str | None = None  # sweep name, for cases of a scaling sweep
  size: int | None = None  # the swept quantity
  grad: bool = True  # whether fwd+bwd variants are timed
  # The forms whose fwd+bwd variants are timed (None: all of them).
  grad_forms: tuple[str, ...] | None = None
  peers: bool = True  # whether peer runtimes are timed
  # Threads for the peer runtimes on this case (None: `--threads`).
  peer_threads: int | None = None
  # With `peer_threads`: also time onnxruntime on `--threads` threads
  # (`onnxruntime.threads`), its output compared and marked when wrong
  # rather than stopping the run (the reductions, which race there).
  threaded_peer: bool = False
  # A peer's fwd+bwd (`torch.grad`) that follows a documented convention of
  # its own on part of its outputs: PyTorch's `amax` splits the gradient
  # evenly among tied elements where jaxops gives it to one
  # (docs/semantics.md#reduction-derivatives, `tied_extrema`), and sums a
  # loss that rounds in its own order (`loss_left_out`). `(rule, where)`:
  # `where(inputs, out)`, given the case's inputs and jaxops' forward
  # output, returns one mask per fwd+bwd output (None, or missing: none),
  # True where the conventions may differ. There the peer is not compared;
  # elsewhere it must agree bit for bit.
  peer_grad_convention: tuple[str, Callable[..., list[Any]]] | None = None
  # Whether the index tuples are distinct (ScatterNDUpdate: where the
  # `unique_indices=True` promise holds and may be compared with the default).
  unique: bool = True
  # Variants left out of this case on purpose, with the reason (shown in the
  # tables as skipped).
  excluded: dict[str, str] = dataclasses.field(default_factory=dict)
  loop: Callable[..., Any] | None = None
  in_axes: tuple[int | None, ...] | None = None
  batch: int | None = None  # the vmapped batch size

  @property
  def key(self) -> str:
    return f"{self.op}/{self.name}"


def vmap_case(
  base: Case,
  name: str,
  batch: int,
  in_axes: tuple[int | None, ...],
  batched: Callable[..., jax.Array],
  *,
  forms: Sequence[str] = ("jaxops",),
  donate: bool = False,
  grad: bool = True,
) -> Case:
  """`base` under `jax.vmap` over a batch of `batch` examples.

  Arguments with `in_axes` 0 get `batch` independent draws of `base`'s
  generator stacked on a new leading axis; those with None are shared (the
  first draw). The forms are `base`'s `forms` under `jax.vmap`, `batched`
  (the equivalent single call of the batched operator, a function of the same
  arguments) and, through `loop`, a Python loop of jitted calls of
  `base.forms["jaxops"]`, one per example. The traffic floors are `batch`
  times one example's.
  """

  def make_inputs(rng):
    draws = [base.make_inputs(rng) for _ in range(batch)]
    return tuple(
      np.stack([d[j] for d in draws]) if axis == 0 else draws[0][j]
      for j, axis in enumerate(in_axes)
    )

  t = base.traffic
  traffic = Traffic(
    batch * t.streamed,
    batch * t.random_useful,
    batch * t.random_lines,
    batch * t.copy,
  )
  vmapped = {f: jax.vmap(base.forms[f], in_axes=in_axes) for f in forms}
  axes = ", ".join("batched" if a == 0 else "shared" for a in in_axes)
  return dataclasses.replace(
    base,
    name=name,
    tier="vmap",
    make_inputs=make_inputs,
    shapes=f"{batch} x ({base.shapes}); arguments {axes}",
    forms={**vmapped, "batched": batched},
    traffic=traffic,
    grad_forms=("jaxops", "batched"),
    openvino=None,
    onnx=None,
    torch=None,
    torch_inplace=None,
    donate_argnum=base.donate_argnum if donate else None,
    sweep=None,
    size=None,
    grad=grad,
    peers=False,
    loop=base.forms["jaxops"],
    in_axes=tuple(in_axes),
    batch=batch,
  )


def vmap_cases(
  base: Case,
  batch: int,
  batched: dict[str, tuple[tuple[int | None, ...], Callable[..., jax.Array]]],
  *,
  forms: Sequence[str] = ("jaxops",),
  donate: bool = False,
) -> list[Case]:
  """One `vmap_case` of `base` per entry `name: (in_axes, batched)` of
  `batched`; with `donate`, those whose data (`base.donate_argnum`) is
  batched donate it (a shared one is the caller's)."""
  return [
    vmap_case(
      base,
      name,
      batch,
      in_axes,
      fn,
      forms=forms,
      donate=donate
      and base.donate_argnum is not None
      and in_axes[base.donate_argnum] == 0,
    )
    for name, (in_axes, fn) in batched.items()
  ]


def broadcast_batch(x: jax.Array, batch: int) -> jax.Array:
  """`x` repeated along a new leading axis of `batch`: a shared argument of
  a vmap case, as the equivalent batched call takes it."""
  return jnp.broadcast_to(x, (batch,) + x.shape)


def sweep_case(base: Case, sweep: str, size: int) -> Case:
  """`base` as the point of size `size` of the scaling sweep `sweep`:
  forward variants only and no peers, since a sweep shows how jaxops' own
  time grows."""
  return dataclasses.replace(
    base, tier="sweep", sweep=sweep, size=size, grad=False, peers=False
  )


@dataclasses.dataclass
class Runner:
  """A variant ready to time: `call(setup())` runs it once.

  `compile_s` is None for an eager runtime (PyTorch), which compiles nothing.
  `compile_cpu_s` is the CPU time the process spent compiling: unlike the
  wall time it does not grow with the load of other processes.
  """

  compile_s: float | None
  call: Callable[[Any], Any]
  outputs: Callable[[Any], list[np.ndarray]]
  setup: Callable[[], Any] = lambda: None
  note: str = ""
  # What a call observed, e.g. {"donated": True} once XLA reused a donated
  # buffer.
  state: dict[str, Any] = dataclasses.field(default_factory=dict)
  compile_cpu_s: float | None = None


@dataclasses.dataclass
class Variant:
  name: str
  group: str  # "fwd" or "fwdbwd": variants of one group must agree bitwise
  build: Callable[[], Runner]
  donated: bool = False  # writes into its data argument (donated, in place)
  # The packages a peer variant needs (skipped with a note without them);
  # empty for the JAX variants, which must always build.
  requires: tuple[str, ...] = ()
  # A peer whose output may be wrong (it races): a difference from the
  # reference is recorded (`wrong` in the JSON), not raised.
  may_differ: bool = False
  # For a `may_differ` peer: (this variant, its serial form) built on other
  # inputs, compared on `order_probe`'s inputs.
  order_check: (
    Callable[[Sequence[np.ndarray]], tuple[Runner, Runner]] | None
  ) = None
  threads: int | None = None  # a peer's thread count, when not the case's
  # The peer's own convention where it may differ (`Case.peer_grad_convention`).
  convention: str | None = None


def small_ints(
  rng: np.random.Generator, shape: Sequence[int], high: int, dtype=np.float32
) -> np.ndarray:
  """Nonzero integers in [-high, high] as floats.

  Every sum and product the fwd+bwd variants form is then exact, so results
  must agree bit for bit whatever order XLA or a peer accumulates in, and no
  -0.0 can arise from a zero operand. (Drawn as int8 where they fit: the IR
  scatter's 38M elements take a second, not ten.)
  """
  shape = tuple(shape)
  narrow = np.int8 if high <= np.iinfo(np.int8).max else np.int64
  values = rng.integers(1, high + 1, size=shape, dtype=narrow)
  negative = rng.integers(0, 2, size=shape, dtype=np.int8).astype(bool)
  np.negative(values, out=values, where=negative)
  return values.astype(dtype)


def order_probe(
  rng: np.random.Generator, inputs: Sequence[np.ndarray]
) -> list[np.ndarray]:
  """`inputs` with every float array redrawn from a standard normal.

  On `small_ints` every order of a sum has the same bits, so a peer that
  sums in another order than the serial one (onnxruntime on several
  threads) agrees there and is caught only where it loses an update; on
  these values almost every reordered sum rounds differently.
  """
  return [
    rng.standard_normal(a.shape).astype(a.dtype)
    if np.issubdtype(a.dtype, np.floating)
    else a
    for a in inputs
  ]


# PyTorch's `scatter_reduce` "amax"/"amin" split a slot's gradient evenly
# among the elements that reach its maximum (data included); jaxops gives it
# to one of them (docs/semantics.md#reduction-derivatives).
TIES_SPLIT = (
  "the gradient of a max split evenly among tied elements (jaxops gives it "
  "to one)"
)


# A mean is no integer, and a sum of products of means rounds: the loss
# `sum(out * w)` depends on the order of the sum, which is each
# implementation's own (the means themselves and the gradients, one division
# each, are compared bit for bit).
LOSS_ORDER = "the loss of non-integer means summed in its own order"


def loss_left_out(inputs, out) -> list[np.ndarray | None]:
  """The masks that leave the loss (output 0) out of the comparison."""
  del inputs, out
  return [np.ones((), bool)]


def tied_extrema(
  data: np.ndarray, targets: np.ndarray, updates: np.ndarray, out: np.ndarray
) -> list[np.ndarray | None]:
  """Where a max (or min) reduction's gradient conventions may differ: the
  masks, for `value_and_grad` w.r.t. (data, updates), of the elements of
  data and updates whose slot's result two or more of them reach (data's
  own element included). `targets` is each update element's flat index into
  data; `out` the reduction's result. The loss is not masked (None)."""
  out = out.reshape(-1)
  targets = targets.reshape(-1)
  reached = updates.reshape(-1) == out[targets]
  count = np.bincount(targets[reached], minlength=out.size)
  tied = count + (data.reshape(-1) == out) >= 2
  return [None, tied.reshape(data.shape), tied[targets].reshape(updates.shape)]


def _leaves(tree) -> list[np.ndarray]:
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def fwd_bwd(
  fn: Callable[..., jax.Array], diff_argnums: tuple[int, ...]
) -> Callable[..., Any]:
  """`value_and_grad` of `sum(fn(*args) * w)`, `w` the last argument."""

  def loss(*args):
    *xs, w = args
    return jnp.sum(fn(*xs) * w)

  return jax.value_and_grad(loss, argnums=diff_argnums)


def _compile(jitted, args) -> tuple[Any, float, float]:
  """(compiled, wall seconds, process CPU seconds) of `jitted` on `args`."""
  start, cpu = time.perf_counter(), time.process_time()
  compiled = jitted.lower(*args).compile()
  return (compiled, time.perf_counter() - start, time.process_time() - cpu)


def jax_runner(
  fn: Callable[..., Any],
  args: Sequence[jax.Array],
  donate_argnum: int | None = None,
) -> Runner:
  """Compiles `fn` ahead of time (timed) and returns its runner.

  A donated argument gets a fresh device copy before every call (outside
  the timed region), as a caller that owns its buffer would have.
  """
  donate = () if donate_argnum is None else (donate_argnum,)
  jitted = jax.jit(fn, donate_argnums=donate)
  compiled, compile_s, compile_cpu_s = _compile(jitted, args)
  args = tuple(args)
  if donate_argnum is None:
    return Runner(
      compile_s,
      lambda a: compiled(*a),
      _leaves,
      setup=lambda: args,
      compile_cpu_s=compile_cpu_s,
    )

  def setup():
    fresh = list(args)
    fresh[donate_argnum] = jnp.array(args[donate_argnum], copy=True)
    jax.block_until_ready(fresh[donate_argnum])
    return tuple(fresh)

  state: dict[str, Any] = {}

  def call(a):
    out = compiled(*a)
    state["donated"] = a[donate_argnum].is_deleted()
    return out

  return Runner(
    compile_s,
    call,
    _leaves,
    setup=setup,
    state=state,
    compile_cpu_s=compile_cpu_s,
  )


def loop_runner(
  fn: Callable[..., Any],
  args: Sequence[jax.Array],
  in_axes: Sequence[int | None],
) -> Runner:
  """A Python loop of jitted `fn` calls, one per example of the batch.

  The examples are split off the batched arguments before the clock starts
  (shared arguments are passed as they are); the outputs are stacked for the
  bit-exactness check only, outside the clock.
  """
  batch = next(a.shape[0] for a, axis in zip(args, in_axes) if axis == 0)
  examples = [
    tuple(a[b] if axis == 0 else a for a, axis in zip(args, in_axes))
    for b in range(batch)
  ]
  jax.block_until_ready(examples)
  compiled, compile_s, compile_cpu_s = _compile(jax.jit(fn), examples[0])

  def outputs(outs):
    return [np.stack(leaves) for leaves in zip(*map(_leaves, outs))]

  return Runner(
    compile_s,
    lambda ex: [compiled(*e) for e in ex],
    outputs,
    setup=lambda: examples,
    compile_cpu_s=compile_cpu_s,
  )


def _same_bits(
  a: np.ndarray, b: np.ndarray, left_out: np.ndarray | None = None
) -> tuple[bool, str]:
  """Whether `a` and `b` have the same bits (where `left_out` is False)."""
  if a.shape != b.shape or a.dtype != b.dtype:
    return False, f"{a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
  if left_out is not None and left_out.shape != a.shape:
    return False, f"{a.shape} vs a mask of {left_out.shape}"
  a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
  keep = None if left_out is None else ~left_out.reshape(-1)
  bits_a, bits_b = (x.reshape(-1).view(np.uint8) for x in (a, b))
  if keep is not None:
    bits_a, bits_b = (
      x.reshape(a.size, a.itemsize)[keep] for x in (bits_a, bits_b)
    )
  compared = "" if keep is None else f" on {int(keep.sum())} of {a.size}"
  if np.array_equal(bits_a, bits_b):
    return True, "bit-exact" + compared
  differ = a != b
  if np.issubdtype(a.dtype, np.inexact):
    differ &= ~(np.isnan(a) & np.isnan(b))
  if left_out is not None:
    differ &= ~left_out
  if not differ.any():
    return True, (
      f"equal{compared} (differs only in the sign of zero or NaN payload)"
    )
  where = np.argwhere(differ)
  first = tuple(int(i) for i in where[0])
  return False, (
    f"{int(differ.sum())} of {a.size} elements differ{compared}, first at "
    f"{first}: {a[first]!r} vs {b[first]!r}"
  )


def _compared(
  leaves: Sequence[np.ndarray],
  ref_leaves: Sequence[np.ndarray],
  left_out: Sequence[np.ndarray | None] | None = None,
) -> tuple[str | None, list[str]]:
  """(how the first output that differs from the reference's differs, or
  None; the detail of each output compared until then). Output i is
  compared only where `left_out[i]` (a mask, or None) is False."""
  if len(leaves) != len(ref_leaves):
    return f"{len(leaves)} outputs, the reference {len(ref_leaves)}", []
  details = []
  masks = list(left_out or []) + [None] * len(leaves)
  for i, (a, b, mask) in enumerate(zip(leaves, ref_leaves, masks)):
    ok, detail = _same_bits(a, b, mask)
    if not ok:
      return f"output {i}: {detail}", details
    details.append(detail)
  return None, details


def first_difference(
  leaves: Sequence[np.ndarray], ref_leaves: Sequence[np.ndarray]
) -> str | None:
  """How the first output that differs from the reference's differs, or
  None when every output has the same bits."""
  return _compared(leaves, ref_leaves)[0]


def compare_outputs(
  case: Case,
  name: str,
  leaves: Sequence[np.ndarray],
  ref: str,
  ref_leaves: Sequence[np.ndarray],
  left_out: Sequence[np.ndarray | None] | None = None,
) -> list[dict[str, str]]:
  """Compares variant `name`'s outputs with `ref`'s (output i only where
  `left_out[i]` is False); raises on a mismatch.

  Returns one record per output array, for the JSON file.
  """
  difference, details = _compared(leaves, ref_leaves, left_out)
  if difference is not None:
    raise BitExactError(f"{case.key}: {name} differs from {ref}: {difference}")
  return [
    {"variant": name, "reference": ref, "output": str(i), "result": detail}
    for i, detail in enumerate(details)
  ]


def left_out_differences(
  leaves: Sequence[np.ndarray],
  ref_leaves: Sequence[np.ndarray],
  left_out: Sequence[np.ndarray | None],
) -> dict[str, int]:
  """How many elements the masks `left_out` leave out of a comparison with
  the reference, and how many of those differ from it."""
  total = differ = 0
  for a, b, mask in zip(leaves, ref_leaves, left_out):
    if mask is not None and a.shape == b.shape == mask.shape:
      total += int(mask.sum())
      differ += int(np.count_nonzero(a[mask] != b[mask]))
  return {"left_out": total, "differ": differ}


def check_bit_exact(
  case: Case, outputs: dict[str, tuple[str, list[np.ndarray]]]
) -> list[dict[str, str]]:
  """Compares every variant with the first of its group; raises on mismatch.

  `outputs` maps a variant name to (group, output arrays), in plan order.
  """
  checks = []
  reference: dict[str, str] = {}
  for name, (group, leaves) in outputs.items():
    ref = reference.setdefault(group, name)
    if ref != name:
      checks += compare_outputs(case, name, leaves, ref, outputs[ref][1])
  return checks


@dataclasses.dataclass
class Timing:
  iqm_s: float
  """The interquartile mean: the mean of the middle half of the sorted
  times."""
  p10_s: float
  p90_s: float
  reps: int
  # The times in the order they ran: the i-th of every variant of a case ran
  # in the same round (`paired_ratio`).
  rounds_s: list[float] = dataclasses.field(default_factory=list)


def measure(
  runners: dict[str, Runner],
  warmup: int,
  reps: int,
  budget_s: float,
  min_reps: int | Mapping[str, int] = 5,
) -> dict[str, Timing]:
  """The IQM of up to `reps` timed calls per runner (at least `min_reps`,
  one count for all or one per runner name).

  The interquartile mean, not the median: the times of a sub-0.1 ms call on
  XLA:CPU often fall in two modes (15 and 43 us for every JAX variant of a
  GatherElements sweep case, with or without jaxops), and with the split
  near half the median jumps from one mode to the other between runs and
  variants (that case read fill/clip 2.46 in one run and 0.38 in another).
  The mean of the middle half moves smoothly with the split, and is close to
  the median when the times have one mode.

  The runners are timed round-robin, one call each per round in a shuffled
  order, so that load
  from other processes on a shared machine hits every variant of a case
  alike and their ratios stay meaningful. A runner stops early once
  `budget_s` of its timed calls, or 3x that in wall time including setup,
  have run. Each call is synchronized with
  `block_until_ready`; `setup` (e.g. the fresh copy a donated buffer needs)
  runs outside the clock.
  """
  for runner in runners.values():
    for _ in range(warmup):
      jax.block_until_ready(runner.call(runner.setup()))
  times: dict[str, list[float]] = {name: [] for name in runners}
  spent = dict.fromkeys(runners, 0.0)
  wall = dict.fromkeys(runners, 0.0)  # with setup, e.g. copies for donation

  least = (
    dict.fromkeys(runners, min_reps)
    if isinstance(min_reps, int)
    else {name: min_reps[name] for name in runners}
  )

  def running(name):
    n = len(times[name])
    return n < reps and (
      n < least[name] or (spent[name] < budget_s and wall[name] < 3 * budget_s)
    )

  # A fixed-seed shuffle of each round, so no variant always runs right
  # after the same neighbour (whose threads or cache state it would inherit).
  order = list(runners)
  shuffle = random.Random(0).shuffle
  while any(running(name) for name in runners):
    shuffle(order)
    for name in order:
      runner = runners[name]
      if not running(name):
        continue
      setup_start = time.perf_counter()
      state = runner.setup()
      start = time.perf_counter()
      out = jax.block_until_ready(runner.call(state))
      elapsed = time.perf_counter() - start
      # Freed only now, outside the clock: unmapping a large output is the
      # allocator's cost, not the operator's (the peers reuse their output).
      del out, state
      times[name].append(elapsed)
      spent[name] += elapsed
      wall[name] += time.perf_counter() - setup_start
  out = {}
  for name, rounds in times.items():
    ts = sorted(rounds)
    pick = lambda q, ts=ts: ts[min(len(ts) - 1, int(q * len(ts)))]
    out[name] = Timing(_iqm(ts), pick(0.1), pick(0.9), len(ts), rounds)
  return out


def paired_ratio(
  rounds_a: Sequence[float], rounds_b: Sequence[float]
) -> dict[str, float] | None:
  """The median of a's time over b's, round by round, with its 95%
  confidence interval; None with fewer than 6 common rounds.

  `measure` times every variant of a case once per round, so the two calls
  of a round ran under the same load from other processes: their ratio
  does not carry it, where a ratio of two summaries does. The interval is
  the distribution-free one of a median (order statistics, from the
  binomial distribution of how many ratios fall below it), so it assumes
  nothing about the shape of the times.
  """
  ratios = sorted(a / b for a, b in zip(rounds_a, rounds_b))
  n = len(ratios)
  if n < 6:
    return None
  # The largest k with P(Binomial(n, 1/2) < k) <= 2.5%: then the k-th
  # smallest and the k-th largest ratio bound the median with >= 95%.
  k, below = 0, 0.0
  while below + math.comb(n, k) / 2**n <= 0.025:
    below += math.comb(n, k) / 2**n
    k += 1
  return {
    "median": statistics.median(ratios),
    "lo": ratios[k - 1],
    "hi": ratios[n - k],
    "n": n,
  }


def _iqm(sorted_times: list[float]) -> float:
  """The mean of the middle half of `sorted_times` (all of them below 4)."""
  n = len(sorted_times)
  middle = sorted_times[n // 4 : n - n // 4] if n >= 4 else sorted_times
  return statistics.fmean(middle)


def measure_bandwidth(nbytes: int, reps: int = 7) -> dict[str, float]:
  """Copy bandwidth in bytes/s: read + write bytes of a large `np.copyto`.

  Also measures a jitted device copy of the same size, which is the relevant
  number on accelerators (and uses XLA's threads on CPU).
  """
  n = nbytes // 4
  src = np.arange(n, dtype=np.float32)
  dst = np.empty_like(src)
  np.copyto(dst, src)
  host = []
  for _ in range(reps):
    start = time.perf_counter()
    np.copyto(dst, src)
    host.append(time.perf_counter() - start)
  x = jax.device_put(src)
  copy = jax.jit(lambda v: v + 1.0)  # a copy XLA cannot elide
  jax.block_until_ready(copy(x))
  device = []
  for _ in range(reps):
    start = time.perf_counter()
    jax.block_until_ready(copy(x))
    device.append(time.perf_counter() - start)
  del x
  return {
    "bytes": float(2 * n * 4),
    "host_copyto_Bps": 2 * n * 4 / statistics.median(host),
    "device_copy_Bps": 2 * n * 4 / statistics.median(device),
  }
