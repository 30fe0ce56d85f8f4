"""`at_rows`: `data.at[rows].<op>(updates, mode="drop")` on data viewed as
rows, built in the form XLA gives every scatter before it emits one.

Every row scatter of the two scatter operators goes through it: rows of data
`(S, ...)`, one index per update, updates `(n,) + data.shape[1:]`. `.at[]`
lowers that with the indexed dimension inserted (`inserted_window_dims=(0,)`);
XLA's scatter simplifier puts it back as a reshape of updates to
`(n, 1) + data.shape[1:]`, and XLA:CPU lays that reshape out as a copy
whenever updates were themselves reshaped from more than one batch dimension
(a ScatterElementsUpdate of 2-D data, a ScatterNDUpdate whose indices have
more than one batch dimension, plain `.at[]` the same): a pass over the
updates and a buffer of their size, as large as the scatter's own input
(docs/design.md#canonical-scatter). Here the scatter is bound with that
window dimension already in updates and no inserted dimension, so the
simplifier has nothing to reshape. The primitive, its derivative and its
batching rule are `.at[]`'s own (`lax.scatter`, `scatter_add`, ...).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

_SCATTERS = {
  "set": lax.scatter,
  "add": lax.scatter_add,
  "multiply": lax.scatter_mul,
  "min": lax.scatter_min,
  "max": lax.scatter_max,
}


def at_rows(
  data: jax.Array,
  rows: jax.Array,
  updates: Any,
  op: str,
  unique_indices: bool = False,
) -> jax.Array:
  """`data.at[rows].<op>(updates, mode="drop", wrap_negative_indices=False)`
  for data (S, ...), rows (n,) and updates broadcastable to
  (n,) + data.shape[1:]: rows out of [0, S) are dropped, negative ones too.
  `op` is an `.at[]` method name: set, add, multiply, min or max."""
  data = jnp.asarray(data)
  tail = data.shape[1:]
  updates = jnp.broadcast_to(
    jnp.asarray(updates, data.dtype), rows.shape + tail
  )
  dimension_numbers = lax.ScatterDimensionNumbers(
    update_window_dims=tuple(range(1, data.ndim + 1)),
    inserted_window_dims=(),
    scatter_dims_to_operand_dims=(0,),
  )
  return _SCATTERS[op](
    data,
    rows[:, None],
    updates.reshape(rows.shape + (1,) + tail),
    dimension_numbers,
    indices_are_sorted=False,
    unique_indices=unique_indices,
    mode=lax.GatherScatterMode.FILL_OR_DROP,
  )
