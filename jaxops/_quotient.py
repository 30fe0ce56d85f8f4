"""`quotient(x, count)`: a mean's division, rounded as IEEE 754 says on
every backend (docs/design.md#mean-quotient).

The float `mean` reductions divide a sum by a count, and the runtimes (and
NumPy's reference) round that quotient correctly. XLA:CPU divides float32
correctly rounded too; XLA:GPU emits PTX's `div.full.f32`, within 2 ulp (on
an H200 jaxops' float32 means differed from the CPU's in the last bit,
bench/DETERMINISM-gpu-h200.md), and XLA promises no correctly rounded
division on TPUs either. So on every platform but CPU, for float32 and the
narrower floats computed in float32, jaxops corrects the backend's quotient
q: the exact residual `x - q * count`, from products of 12-bit halves
(exact in any IEEE multiply, so a fused multiply-add cannot change them),
says which of q and its neighbours is nearest to `x / count`, twice. The
CPU keeps its own division (`_order.by_platform`). float64 (correctly
rounded on CPU and GPU) and complex are the backend's division.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops import _order
from jaxops._common import vary_alike
from jaxops._transposable import transposable

# The low 12 bits of a float32's 23-bit fraction: cleared, the rest is a
# 12-bit significand, and the cleared part another.
_HIGH_HALF = np.uint32(0xFFFFF000)
# Where the residual's partial products neither overflow nor leave the
# normal range, for counts up to 2**24: outside, the backend's quotient.
_SMALLEST, _LARGEST = np.float32(2.0**-75), np.float32(2.0**125)
_MAX = np.finfo(np.float32).max


def quotient(x: jax.Array, count: jax.Array) -> jax.Array:
  """`x / count`, correctly rounded (round to nearest even) on every backend
  where |x| lies in [2**-75, 2**125], for a positive integer-valued `count`
  (x's float dtype) of at most 2**24 that broadcasts against `x`.

  Linear in `x`: its derivative and transpose are the same division of the
  tangent or cotangent (a `transposable`, whose jvp, transpose and batching
  rules never trace the correction)."""
  count = jnp.broadcast_to(count, x.shape)
  count, x = vary_alike(count, x)
  (q,) = transposable(_divide, _divide, count, [x], [jax.typeof(x)])
  return q


def _divide(count, x):
  """x / count, correctly rounded: the backend's division on CPU, the
  corrected one on every other platform (`_order.by_platform`: the
  switch that forces the constructed path on CPU forces this too)."""
  dtype = np.dtype(x.dtype)
  if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize > 4:
    return (_backend_quotient(x, count),)
  return (_order.by_platform(_backend_quotient, _nearest_quotient, x, count),)


def _backend_quotient(x, count):
  # A divisor that depends on x: XLA:CPU rewrites `x / broadcast(c)` into
  # `x * broadcast(1 / c)`, which rounds otherwise (a NaN stays NaN).
  return x / jnp.where(jnp.isnan(x), np.ones((), x.dtype), count)


def _nearest_quotient(x, count):
  """The corrected quotient, in float32 for the narrower floats (rounded
  twice, as XLA:CPU does: exact, float32 having more than twice their
  precision)."""
  wide = x.astype(np.float32)
  c = count.astype(np.float32)
  return nearest(wide, c, wide / c).astype(x.dtype)


def nearest(x: jax.Array, c: jax.Array, q: jax.Array) -> jax.Array:
  """The float32 nearest to `x / c`, given `q` within 2 ulp of it (where
  |x| lies in [2**-75, 2**125]; elsewhere `q`)."""
  c_high, c_low = _halves(c)
  in_range = (jnp.abs(x) >= _SMALLEST) & (jnp.abs(x) <= _LARGEST)
  nearer, r = q, _residual(x, q, c_high, c_low)
  for _ in range(2):
    # Toward x / c (c > 0); r == 0 is exact, and every step away is larger.
    # (Toward the largest float, not inf: no inf exists but in a result,
    # for jax_debug_infs; every quotient in range is far below it.)
    up = jnp.where(r > 0, _MAX, -_MAX)
    step = lax.nextafter(nearer, up)
    r_step = _residual(x, step, c_high, c_low)
    # The nearest has |r| <= ulp * c / 2, exact; no quotient of floats is a
    # tie, and a rounded residual of a farther one is no smaller.
    closer = jnp.abs(r_step) < jnp.abs(r)
    nearer = jnp.where(closer, step, nearer)
    r = jnp.where(closer, r_step, r)
  return jnp.where(in_range, nearer, q)


def _halves(v: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(high, low) with high + low == v, each with a 12-bit significand."""
  bits = lax.bitcast_convert_type(v, np.uint32) & _HIGH_HALF
  high = lax.bitcast_convert_type(bits, np.float32)
  return high, v - high


def _residual(x, q, c_high, c_low):
  """x - q * c: exact where q is within an ulp of x / c (rounded, with
  its sign, for two): every partial product has at most 24 bits, and each
  running difference fits in 24 (Dekker's division residual)."""
  q_high, q_low = _halves(q)
  r = x - q_high * c_high
  r = r - q_high * c_low
  r = r - q_low * c_high
  return r - q_low * c_low
