"""GatherND, GatherElements, ScatterNDUpdate and StridedSlice under jax.vmap,
each checked against a Python loop.

Every case maps an operator over a batch of examples -- per-example data,
per-example indices or updates, or both, along leading or inner axes -- with
the static attributes (batch_dims, axis, begin/end/strides and masks) fixed.
The vmapped result must equal stacking the operator's results example by
example, bit for bit: these are data-movement operators, so any difference is
a bug. The last cases vmap a gradient (per-example gradients) and nest two
vmaps. Data are small integers stored as float32, so the gradient sums are
exact too.

Run: python examples/batched.py   (a few seconds on a CPU)
"""

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxops

BATCH = 5


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  fn: Callable[..., jax.Array]
  args: tuple[np.ndarray, ...]
  in_axes: Sequence[int | None]


def looped(fn, args, in_axes):
  """fn applied example by example (slicing each mapped arg), stacked on 0."""
  size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
  fn = jax.jit(fn)  # One compilation for every example.
  results = []
  for n in range(size):
    example = [
      a if ax is None else np.take(a, n, axis=ax)
      for a, ax in zip(args, in_axes)
    ]
    results.append(fn(*example))
  return jnp.stack(results)


def floats(rng, shape):
  return rng.integers(-9, 10, size=shape).astype(np.float32)


def indices(rng, sizes, lead_shape):
  """Valid indices in [-s, s-1] (negative ones included), last dim = tuple."""
  sizes = np.asarray(sizes)
  return rng.integers(-sizes, sizes, size=(*lead_shape, len(sizes)))


def unique_tuples(rng, sizes, count, batch):
  """Per example, `count` distinct index tuples into dims of `sizes`."""
  flat = np.stack(
    [rng.choice(np.prod(sizes), count, replace=False) for _ in range(batch)]
  )
  return np.stack(np.unravel_index(flat, sizes), axis=-1)


def per_example_loss(table, rows, targets):
  """A GatherND lookup then a GatherElements pick, as in a loss."""
  logits = jaxops.gather_nd(table, rows)  # [T, V]
  return jnp.sum(jaxops.gather_elements(logits, targets, axis=1) ** 2)


def make_cases(rng):
  b = BATCH
  return [
    Case(
      "gather_nd b=0, data and indices mapped",
      lambda d, i: jaxops.gather_nd(d, i),
      (floats(rng, (b, 4, 5, 3)), indices(rng, (4, 5), (b, 6))),
      (0, 0),
    ),
    Case(
      "gather_nd b=0, only indices mapped (shared table)",
      lambda d, i: jaxops.gather_nd(d, i),
      (floats(rng, (7, 3)), indices(rng, (7,), (b, 2, 4))),
      (None, 0),
    ),
    Case(
      "gather_nd batch_dims=1 inside each example, in_axes=(1, 0)",
      lambda d, i: jaxops.gather_nd(d, i, batch_dims=1),
      (floats(rng, (3, b, 6, 2)), indices(rng, (6,), (b, 3, 4))),
      (1, 0),
    ),
    Case(
      "gather_elements axis=1, data and indices mapped",
      lambda d, i: jaxops.gather_elements(d, i, axis=1),
      (floats(rng, (b, 4, 6)), rng.integers(-6, 6, (b, 4, 9))),
      (0, 0),
    ),
    Case(
      "gather_elements axis=-1, smaller indices, only indices mapped",
      lambda d, i: jaxops.gather_elements(d, i, axis=-1),
      (floats(rng, (4, 5)), rng.integers(-5, 5, (2, 3, b))),
      (None, 2),
    ),
    Case(
      "scatter_nd_update elements, all three mapped",
      lambda d, i, u: jaxops.scatter_nd_update(d, i, u),
      (
        floats(rng, (b, 4, 5)),
        unique_tuples(rng, (4, 5), 6, b),
        floats(rng, (b, 6)),
      ),
      (0, 0, 0),
    ),
    Case(
      "scatter_nd_update slices, shared data, indices+updates mapped",
      lambda d, i, u: jaxops.scatter_nd_update(d, i, u),
      (
        floats(rng, (6, 3)),
        unique_tuples(rng, (6,), 2, b),
        floats(rng, (b, 2, 3)),
      ),
      (None, 0, 0),
    ),
    Case(
      "scatter_nd_update, only data mapped, in_axes=2",
      lambda d, i, u: jaxops.scatter_nd_update(d, i, u),
      (floats(rng, (4, 3, b)), np.array([[3], [-4]]), floats(rng, (2, 3))),
      (2, None, None),
    ),
    Case(
      "strided_slice [1:-1, ::-2] data mapped",
      lambda d: jaxops.strided_slice(
        d, [1, 0], [-1, 0], [1, -2], begin_mask=[0, 1], end_mask=[0, 1]
      ),
      (floats(rng, (b, 6, 7)),),
      (0,),
    ),
    Case(
      "strided_slice [-1, newaxis, 3:0:-1] (shrink, new axis), in_axes=1",
      lambda d: jaxops.strided_slice(
        d,
        [-1, 0, 3],
        [0, 0, 0],
        [1, 1, -1],
        new_axis_mask=[0, 1, 0],
        shrink_axis_mask=[1, 0, 0],
      ),
      (floats(rng, (4, b, 5)),),
      (1,),
    ),
    Case(
      "strided_slice [..., ::2] (ellipsis), in_axes=-1",
      lambda d: jaxops.strided_slice(
        d, [0, 0], [0, 0], [1, 2], end_mask=[0, 1], ellipsis_mask=[1]
      ),
      (floats(rng, (2, 3, 5, b)),),
      (-1,),
    ),
    Case(
      "per-example gradient of gather_nd + gather_elements loss",
      jax.grad(per_example_loss),
      (
        floats(rng, (b, 6, 4)),
        indices(rng, (6,), (b, 3)),
        rng.integers(-4, 4, (b, 3, 2)),
      ),
      (0, 0, 0),
    ),
    Case(
      "nested vmap: gather_nd batch_dims=1 over two batch axes",
      jax.vmap(lambda d, i: jaxops.gather_nd(d, i, batch_dims=1)),
      (floats(rng, (b, 3, 4, 6)), indices(rng, (6,), (b, 3, 4, 2))),
      (0, 0),
    ),
  ]


def main():
  rng = np.random.default_rng(0)
  cases = make_cases(rng)
  all_equal = True
  for case in cases:
    # The loop reference vmaps nothing, except the nested case's inner vmap.
    reference = looped(case.fn, case.args, case.in_axes)
    mapped = jax.jit(jax.vmap(case.fn, in_axes=tuple(case.in_axes)))(*case.args)
    equal = (
      mapped.shape == reference.shape
      and mapped.dtype == reference.dtype
      and bool(jnp.array_equal(mapped, reference))
    )
    max_diff = (
      float(jnp.max(jnp.abs(mapped - reference)))
      if mapped.shape == reference.shape and mapped.size
      else 0.0
    )
    all_equal &= equal
    print(
      f"{case.name:68s} out {str(tuple(mapped.shape)):16s} "
      f"max |difference| {max_diff:g}  {'equal' if equal else 'DIFFERENT'}"
    )
  print(
    f"RESULT {len(cases)} vmap-vs-loop cases: "
    f"{'all equal' if all_equal else 'SOME DIFFER'}"
  )
  if not all_equal:
    raise SystemExit(1)


if __name__ == "__main__":
  main()
