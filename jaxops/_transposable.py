"""`transposable`: a linear call with its own transpose.

`transposable(apply, transpose, residual, linear, out_avals)` is
`apply(residual, *linear)`, linear in `linear`, that JAX never transposes
itself: its transpose is `transpose`, its jvp the same call on the tangents,
and under `vmap` both functions are vmapped. The float `sum`/`sub` scatter
reductions' tangents (`jaxops._linear.linear_with_transpose`) and the moves
of narrow floats as bits (`jaxops._bits`) are built on it
(docs/design.md#fold-cost, docs/design.md#moved-as-bits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops import _common

transposable_p = Primitive("jaxops_transposable")
transposable_p.multiple_results = True


def transposable(
  apply: Callable[..., tuple[jax.Array, ...]],
  transpose: Callable[..., tuple[jax.Array, ...]],
  residual: jax.Array,
  linear: Sequence[jax.Array],
  out_avals: Sequence[jax.core.ShapedArray],
) -> tuple[jax.Array, ...]:
  """`apply(residual, *linear)`, linear in `linear`, transposed by
  `transpose(residual, *cotangents)` (which returns the cotangents of
  `linear`) instead of by JAX.

  `jax.custom_derivatives.linear_call` with a batching rule: under `vmap`
  both functions are vmapped. For a tangent whose own transpose would
  compile (and run) far more than the direct one, e.g. a fold behind a
  `lax.cond` whose transpose is a gather. `apply` and `transpose` are
  hashable static callables; each returns a tuple of arrays. `out_avals`
  are `apply`'s output types (`jax.typeof` of what it returns). The
  primitive carries them, so that neither its abstract evaluation nor its
  jvp, transpose and batching rules trace `apply` (a fold behind a
  `lax.cond` takes a fifth of a second to trace).
  """
  return transposable_p.bind(
    residual,
    *linear,
    apply=apply,
    transpose=transpose,
    out_avals=tuple(out_avals),
  )


def _apply_impl(residual, *linear, apply, transpose, out_avals):
  del transpose, out_avals
  # Eagerly, a cotangent may be a NumPy array (a vjp's backward called on
  # one), and `apply` indexes with `.at`.
  return tuple(apply(*map(jnp.asarray, (residual, *linear))))


def _abstract_eval(residual, *linear, apply, transpose, out_avals):
  del residual, linear, apply, transpose
  return list(out_avals)


def _jvp(primals, tangents, *, apply, transpose, out_avals):
  residual, *linear = primals
  tangents = [ad.instantiate_zeros(t) for t in tangents[1:]]
  out = transposable(apply, transpose, residual, linear, out_avals)
  return out, transposable(apply, transpose, residual, tangents, out_avals)


def _transpose(cts, residual, *linear, apply, transpose, out_avals):
  del out_avals
  cts = [ad.instantiate_zeros(ct) for ct in cts]
  # The cotangents of the linear operands have the operands' types.
  linear_avals = [
    x.aval if ad.is_undefined_primal(x) else jax.typeof(x) for x in linear
  ]
  return [
    None,
    *transposable(transpose, apply, residual, cts, linear_avals),
  ]


def _batch(args, dims, *, apply, transpose, out_avals):
  size, moved = _common.batch_in_front(args, dims)
  batched_avals = [a.update(shape=(size, *a.shape)) for a in out_avals]
  out = transposable(
    jax.vmap(apply), jax.vmap(transpose), moved[0], moved[1:], batched_avals
  )
  return out, [0] * len(out)


transposable_p.def_impl(_apply_impl)
transposable_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(transposable_p, mlir.lower_fun(_apply_impl, True))
ad.primitive_jvps[transposable_p] = _jvp
ad.primitive_transposes[transposable_p] = _transpose
batching.primitive_batchers[transposable_p] = _batch
