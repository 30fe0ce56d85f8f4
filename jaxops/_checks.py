"""Out-of-range reports that cost nothing unless the caller checkifies.

`checked_indices(indices, sizes, message)` returns `indices` unchanged. Under
`jax.experimental.checkify` with `checkify.user_checks` enabled, it adds a
`FailedCheckError` carrying `message` when a row of `indices` is out of range
for `sizes`. `checked_gather_indices(indices, operand_shape, dims)` is the
same for `checkify.index_checks`: it reports the `OOBError` that a gather of
an `operand_shape` array at `indices` (indexing `dims`) would, for gathers
whose own indices are always in range. Outside checkify both are an identity
primitive: it lowers to nothing, carries no effect, and so does not stop
`jax.export` for any platform list, which `checkify.debug_check` in the
default path would (its error effect is not serializable). See
docs/semantics.md#checkify.

The checkify rule is registered in `jax._src.checkify.error_checks`, the table
JAX's own primitives use; this module is the one place that touches it.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import checkify as _checkify
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops._common import along_last_axis, dim_values

_checked_indices_p = Primitive("jaxops_checked_indices")


def checked_indices(
  indices: jax.Array,
  sizes: Sequence[int],
  message: str,
  *,
  negatives_wrap: bool = False,
) -> jax.Array:
  """`indices` (..., k), reported by checkify when a row leaves `sizes`.

  Rows are in range when `0 <= indices[..., j] < sizes[j]` for every j, so
  negative indices must already be wrapped; with `negatives_wrap`, when
  `-sizes[j] <= indices[..., j] < sizes[j]` (indices before the wrap).
  """
  return _checked_indices_p.bind(
    indices, sizes=tuple(sizes), message=message, wraps=negatives_wrap
  )


def checked_gather_indices(
  indices: jax.Array, operand_shape: Sequence[int], dims: Sequence[int]
) -> jax.Array:
  """`indices` (..., k) into `operand_shape[dims]`, reported by
  `checkify.index_checks` like an out-of-range gather when a row leaves it."""
  sizes = tuple(operand_shape[d] for d in dims)
  return _checked_indices_p.bind(
    indices,
    sizes=sizes,
    message=(tuple(operand_shape), tuple(dims)),
    wraps=False,
  )


def _abstract_eval(indices, *, sizes, message, wraps):
  del sizes, message, wraps
  return indices


def _upper(indices, sizes):
  """`sizes` in the indices' dtype along their last axis (run-time values
  where sizes are symbolic)."""
  return along_last_axis(dim_values(sizes, indices.dtype), indices.ndim)


def _in_bounds(indices, sizes, wraps):
  upper = _upper(indices, sizes)
  lower = -upper if wraps else np.zeros((), indices.dtype)
  return jnp.all((indices >= lower) & (indices < upper))


def _checkify_rule(error, enabled_errors, indices, *, sizes, message, wraps):
  if isinstance(message, tuple):  # checked_gather_indices
    operand_shape, dims = message
    if _checkify.OOBError in enabled_errors:
      upper = _upper(indices, sizes)
      oob = (indices < np.zeros((), indices.dtype)) | (indices >= upper)
      payload = _checkify.oob_payload(oob, indices, dims, operand_shape)
      error = _checkify.assert_func(
        error,
        jnp.any(oob),
        _checkify.OOBError(
          _checkify.get_traceback(), "gather", operand_shape, payload
        ),
      )
    return error, indices
  if _checkify.FailedCheckError in enabled_errors:
    failure = _checkify.FailedCheckError(_checkify.get_traceback(), message)
    error = _checkify.assert_func(
      error, jnp.logical_not(_in_bounds(indices, sizes, wraps)), failure
    )
  return error, indices


def _batching_rule(batched_args, batch_dims, **params):
  (indices,), (dim,) = batched_args, batch_dims
  # The rule reads the tuple from the last axis: keep the batch axis in front.
  indices = jnp.moveaxis(indices, dim, 0)
  return _checked_indices_p.bind(indices, **params), 0


def _jvp_rule(primals, tangents, **params):
  (indices,), (indices_dot,) = primals, tangents
  return _checked_indices_p.bind(indices, **params), indices_dot


_checked_indices_p.def_impl(lambda indices, **_: indices)
_checked_indices_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(_checked_indices_p, lambda ctx, indices, **_: [indices])
batching.primitive_batchers[_checked_indices_p] = _batching_rule
ad.primitive_jvps[_checked_indices_p] = _jvp_rule
_checkify.error_checks[_checked_indices_p] = _checkify_rule
