"""Export primitives: each operator call as one equation while exporting.

While `exporting()` is on -- only `jaxops.onnx.to_onnx` turns it on -- each
public operator function hands its arguments to the entry function of the
same name here (a one-line hook at its top) instead of tracing its XLA
lowering. The entry validates the call exactly as the operator does (by
tracing the operator abstractly, so every error is the operator's own),
canonicalizes the static attributes and binds one primitive per operator:

* `gather_nd_p(data, indices; batch_dims, mode, fill_value)`;
* `gather_elements_p(data, indices; axis, mode, fill_value)`;
* `scatter_nd_update_p(data, indices, updates; mode, unique_indices)`, with
  updates exactly `indices.shape[:-1] + data.shape[k:]` (the `(1,)` form of a
  0-d update is reshaped first: both runtimes reject it);
* `strided_slice_p(data; batch_ndim, begin, end, strides, *masks)`, the spec
  applied to `data.shape[batch_ndim:]` (leading dims come from `vmap`).

Calls the runtimes get wrong or cannot express as that node do not bind a
primitive; they are the normal computation, lowered as ordinary JAX:
GatherND and ScatterNDUpdate with empty index tuples (k = 0: OpenVINO's CPU
plugin is wrong on both), and gathers from a zero-size indexed dim, empty
scatters and zero-size scatter data (jaxops' fill value or error, or data
unchanged). See docs/export.md.

Every primitive has an abstract evaluation from the public shape rules
(`jaxops.shapes`), an implementation that is the normal operator computation
(eager evaluation; also its XLA lowering) and a batching rule that keeps a
batched call one primitive wherever the node can express it. They have no
derivative rules: an exported function is a forward computation.

Nothing here imports an exporter: the ONNX lowerings of these primitives are
in `jaxops._onnx_plugins`, the only module that uses jax2onnx's plugin API.
The switch is a JAX config state in the trace context where this JAX version
lets a library declare one, so a `jax.jit` cache never hands a program traced
while exporting to a normal call, or the other way round.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from jaxops import _common
from jaxops._common import op_error

_STATE_NAME = "jaxops_onnx_export_state"
# "off": normal operation; "primitives": the operators bind the primitives;
# "normal": the normal computation, run inside an export (the validation
# traces, the impl). The last is a state of its own so that jit caches never
# mix its traces -- made while the exporter patches jax.numpy -- with normal
# ones.
_OFF, _PRIMITIVES, _NORMAL = "off", "primitives", "normal"


def _make_state() -> Any:
  """A thread-local JAX config state in the trace context, or None."""
  try:
    from jax._src import config as jax_config

    state = jax_config.config_states.get(_STATE_NAME)
    if state is None:
      state = jax_config.enum_state(
        _STATE_NAME,
        (_OFF, _PRIMITIVES, _NORMAL),
        _OFF,
        help="Set by jaxops.onnx.to_onnx while it traces; not a user setting.",
        include_in_trace_context=True,
      )
    return state
  except Exception:  # An older JAX: a plain thread-local value instead.
    return None


_STATE = _make_state()
_LOCAL = threading.local()


def _state() -> str:
  if _STATE is not None:
    return _STATE.value
  return getattr(_LOCAL, "state", _OFF)


@contextlib.contextmanager
def _set_state(value: str) -> Iterator[None]:
  if _STATE is not None:
    with _STATE(value):
      yield
    return
  previous = _state()
  _LOCAL.state = value
  try:
    yield
  finally:
    _LOCAL.state = previous


def active() -> bool:
  """Whether the operators bind their export primitives now."""
  return _state() == _PRIMITIVES


def exporting() -> contextlib.AbstractContextManager[None]:
  """Makes the operators bind their export primitives, in this thread."""
  return _set_state(_PRIMITIVES)


def _ops():
  # Imported late: the operator modules import this one.
  import jaxops

  return jaxops


def _normal(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
  """`fn(*args, **kwargs)` computed the normal way, primitives off."""
  if _state() == _OFF:
    return fn(*args, **kwargs)
  with _set_state(_NORMAL):
    return fn(*args, **kwargs)


# Stand-ins for symbolic dims: two ranges far from any real dim.
_STAND_INS = (1 << 20, 1 << 21)


def _is_int(dim: Any) -> bool:
  return isinstance(dim, (int, np.integer))


def _symbols(shapes: Any) -> list[Any]:
  """The distinct symbolic (non-int) dims of `shapes`, in order."""
  symbols: list[Any] = []
  for shape in shapes:
    for dim in shape:
      if not _is_int(dim) and str(dim) not in map(str, symbols):
        symbols.append(dim)
  return symbols


def _stand_in(shape: Any, symbols: list[Any], base: int) -> tuple[int, ...]:
  names = [str(symbol) for symbol in symbols]
  return tuple(
    int(dim) if _is_int(dim) else base + names.index(str(dim)) for dim in shape
  )


def with_symbolic_dims(rule: Callable[..., Any], shapes: Any, op: str) -> Any:
  """`rule(*shapes)` (a pytree of ints) where shapes may hold symbolic dims.

  The rule runs twice, each symbolic dim replaced by a concrete stand-in from
  two different ranges. A result that differs between the runs must be the
  stand-in of the same symbolic dim in both (the dim passes through) and
  becomes that dim; anything else depends on a symbolic dim's value, which
  an export cannot, and raises.
  """
  symbols = _symbols(shapes)
  if not symbols:
    return rule(*shapes)
  runs = [
    rule(*(_stand_in(shape, symbols, base) for shape in shapes))
    for base in _STAND_INS
  ]

  def merge(first: Any, second: Any) -> Any:
    if first == second:
      return first
    for j, symbol in enumerate(symbols):
      if (first, second) == (_STAND_INS[0] + j, _STAND_INS[1] + j):
        return symbol
    raise op_error(
      op,
      f"symbolic dims {[str(s) for s in symbols]} must pass through "
      "unchanged to export (shapes "
      f"{', '.join(str(tuple(map(str, shape))) for shape in shapes)})",
    )

  return jax.tree.map(merge, runs[0], runs[1])


def _validate(call: Callable[..., Any], *arrays: Any) -> None:
  """Traces `call(*arrays)` (the operator) abstractly, raising its errors.

  Concrete (non-traced) arrays stay concrete in a closure, so the operator's
  eager checks of concrete indices run as they normally do. Symbolic dims are
  replaced by concrete stand-ins (the operators' shape rules need ints).
  """
  shapes = [np.shape(a) if hasattr(a, "shape") else () for a in arrays]
  symbols = _symbols(shapes)
  if not symbols:
    _normal(jax.eval_shape, lambda: call(*arrays))
    return
  specs = [
    jax.ShapeDtypeStruct(_stand_in(a.shape, symbols, _STAND_INS[0]), a.dtype)
    if hasattr(a, "shape")
    else np.asarray(a)
    for a in arrays
  ]
  _normal(jax.eval_shape, call, *specs)


def _shaped(shape: tuple[int, ...], dtype: Any) -> jax.core.ShapedArray:
  return jax.core.ShapedArray(shape, dtype)


def _index_array(indices: Any) -> jax.Array:
  return jnp.asarray(_common.as_array_like(indices))


def _define(
  name: str,
  impl: Callable[..., Any],
  abstract_eval: Callable[..., Any],
  batching_rule: Callable[..., Any],
) -> Primitive:
  prim = Primitive(name)
  prim.def_impl(impl)
  prim.def_abstract_eval(abstract_eval)
  mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
  batching.primitive_batchers[prim] = batching_rule

  return prim


def _move_to(x: jax.Array, axis: int, to: int) -> jax.Array:
  return x if axis == to % x.ndim else jnp.moveaxis(x, axis, to)


def _broadcast_front(x: jax.Array, size: int) -> jax.Array:
  return lax.broadcast(x, (size,))


def _broadcast_back(x: jax.Array, size: int) -> jax.Array:
  return lax.broadcast_in_dim(x, x.shape + (size,), tuple(range(x.ndim)))


# What a batching rule gets for an operand vmap does not map (None in recent
# JAX versions).
_NOT_MAPPED = getattr(batching, "not_mapped", None)


def _mapped(dim: Any) -> bool:
  return dim is not _NOT_MAPPED


def _batch_size(args, dims) -> int:
  return next(x.shape[d] for x, d in zip(args, dims) if _mapped(d))


# GatherND-8 ------------------------------------------------------------------


def _gather_nd_impl(data, indices, *, batch_dims, mode, fill_value):
  return _normal(
    _ops().gather_nd,
    data,
    indices,
    batch_dims,
    mode=mode,
    fill_value=fill_value,
  )


def _gather_nd_abstract(data, indices, *, batch_dims, mode, fill_value):
  del mode, fill_value
  shape = with_symbolic_dims(
    lambda d, i: _ops().shapes.gather_nd(d, i, batch_dims),
    [data.shape, indices.shape],
    "GatherND-8",
  )
  return _shaped(shape, data.dtype)


def _gather_nd_batch(args, dims, *, batch_dims, **params):
  data, indices = args
  data_dim, indices_dim = dims
  b = batch_dims
  if _mapped(data_dim) and _mapped(indices_dim):
    # Both batched: one more batch dim of the same node.
    data = _move_to(data, data_dim, 0)
    indices = _move_to(indices, indices_dim, 0)
    return gather_nd_p.bind(data, indices, batch_dims=b + 1, **params), 0
  if _mapped(indices_dim):
    # More index tuples per batch position: the vmapped axis after the batch
    # dims is just another leading dim of indices.
    indices = _move_to(indices, indices_dim, b)
    return gather_nd_p.bind(data, indices, batch_dims=b, **params), b
  # Data batched only: as the last dim of data it is part of every slice.
  data = _move_to(data, data_dim, -1)
  out = gather_nd_p.bind(data, indices, batch_dims=b, **params)
  return out, out.ndim - 1


gather_nd_p = _define(
  "jaxops_gather_nd", _gather_nd_impl, _gather_nd_abstract, _gather_nd_batch
)


def gather_nd(
  data: Any, indices: Any, batch_dims: Any, mode: Any, fill_value: Any
) -> jax.Array:
  """`jaxops.gather_nd` while exporting."""
  ops = _ops()
  _validate(
    lambda d, i: ops.gather_nd(
      d, i, batch_dims, mode=mode, fill_value=fill_value
    ),
    data,
    indices,
  )
  data = jnp.asarray(data)
  indices = _index_array(indices)
  b = operator.index(batch_dims)
  k = indices.shape[-1]
  out_shape = indices.shape[:-1] + data.shape[b + k :]
  if k == 0:
    # Every tuple selects all of its batch position's data: a broadcast.
    lead = indices.ndim - 1
    dims = tuple(range(b)) + tuple(range(lead, lead + data.ndim - b))
    return lax.broadcast_in_dim(data, out_shape, dims)
  if 0 in data.shape[b : b + k] and 0 not in out_shape:
    return _normal(
      ops.gather_nd, data, indices, b, mode=mode, fill_value=fill_value
    )
  return gather_nd_p.bind(
    data,
    indices,
    batch_dims=b,
    mode=mode,
    fill_value=_common.static_fill_value(fill_value, "GatherND-8"),
  )


# GatherElements-11/13 --------------------------------------------------------


def _gather_elements_impl(data, indices, *, axis, mode, fill_value):
  return _normal(
    _ops().gather_elements,
    data,
    indices,
    axis,
    mode=mode,
    fill_value=fill_value,
  )


def _gather_elements_abstract(data, indices, *, axis, mode, fill_value):
  del mode, fill_value
  shape = with_symbolic_dims(
    lambda d, i: _ops().shapes.gather_elements(d, i, axis),
    [data.shape, indices.shape],
    "GatherElements-13",
  )
  return _shaped(shape, data.dtype)


def _gather_elements_batch(args, dims, *, axis, **params):
  # The node has no batch dims: both operands get the vmapped dim in front
  # (an unbatched one broadcast), and the axis moves one back.
  size = _batch_size(args, dims)
  data, indices = (
    _move_to(x, d, 0) if _mapped(d) else _broadcast_front(x, size)
    for x, d in zip(args, dims)
  )
  return gather_elements_p.bind(data, indices, axis=axis + 1, **params), 0


gather_elements_p = _define(
  "jaxops_gather_elements",
  _gather_elements_impl,
  _gather_elements_abstract,
  _gather_elements_batch,
)


def gather_elements(
  data: Any, indices: Any, axis: Any, mode: Any, fill_value: Any
) -> jax.Array:
  """`jaxops.gather_elements` while exporting."""
  ops = _ops()
  _validate(
    lambda d, i: ops.gather_elements(
      d, i, axis, mode=mode, fill_value=fill_value
    ),
    data,
    indices,
  )
  data = jnp.asarray(data)
  indices = _index_array(indices)
  a = operator.index(axis) % data.ndim
  if data.shape[a] == 0 and indices.size != 0:
    return _normal(
      ops.gather_elements, data, indices, a, mode=mode, fill_value=fill_value
    )
  return gather_elements_p.bind(
    data,
    indices,
    axis=a,
    mode=mode,
    fill_value=_common.static_fill_value(fill_value, "GatherElements-13"),
  )


# ScatterNDUpdate-3 -----------------------------------------------------------


def _scatter_impl(data, indices, updates, *, mode, unique_indices):
  return _normal(
    _ops().scatter_nd_update,
    data,
    indices,
    updates,
    mode=mode,
    unique_indices=unique_indices,
  )


def _scatter_abstract(data, indices, updates, *, mode, unique_indices):
  del mode, unique_indices
  shape = with_symbolic_dims(
    _ops().shapes.scatter_nd_update,
    [data.shape, indices.shape, updates.shape],
    "ScatterNDUpdate-3",
  )
  return _shaped(shape, data.dtype)


def _scatter_batch(args, dims, **params):
  size = _batch_size(args, dims)
  data, indices, updates = args
  data_dim, indices_dim, updates_dim = dims
  if not _mapped(indices_dim):
    # Same tuples for every batch position: the vmapped dim goes last in data
    # (so it is part of every updated slice) and in updates.
    data, updates = (
      _move_to(x, d, -1) if _mapped(d) else _broadcast_back(x, size)
      for x, d in ((data, data_dim), (updates, updates_dim))
    )
    out = scatter_nd_update_p.bind(data, indices, updates, **params)
    return out, out.ndim - 1
  # Tuples per batch position: each gets its position as a leading
  # coordinate, so positions never collide and the order within one is kept.
  data, indices, updates = (
    _move_to(x, d, 0) if _mapped(d) else _broadcast_front(x, size)
    for x, d in zip(args, dims)
  )
  if jnp.iinfo(indices.dtype).bits < 32:  # room for every position
    indices = indices.astype(jnp.int32)
  position = lax.broadcasted_iota(indices.dtype, indices.shape[:-1] + (1,), 0)
  indices = lax.concatenate([position, indices], indices.ndim - 1)
  return scatter_nd_update_p.bind(data, indices, updates, **params), 0


scatter_nd_update_p = _define(
  "jaxops_scatter_nd_update", _scatter_impl, _scatter_abstract, _scatter_batch
)


def scatter_nd_update(
  data: Any, indices: Any, updates: Any, mode: Any, unique_indices: Any
) -> jax.Array:
  """`jaxops.scatter_nd_update` while exporting."""
  ops = _ops()
  _validate(
    lambda d, i, u: ops.scatter_nd_update(
      d, i, u, mode=mode, unique_indices=unique_indices
    ),
    data,
    indices,
    updates,
  )
  data = jnp.asarray(data)
  indices = _index_array(indices)
  updates = jnp.asarray(_common.as_array_like(updates), dtype=data.dtype)
  k = indices.shape[-1]
  n = math.prod(indices.shape[:-1])
  if k == 0 or n == 0 or data.size == 0:
    return _normal(
      ops.scatter_nd_update,
      data,
      indices,
      updates,
      mode=mode,
      unique_indices=unique_indices,
    )
  expected = indices.shape[:-1] + data.shape[k:]
  if updates.shape != expected:
    updates = jnp.reshape(updates, expected)  # the (1,) form of a 0-d update
  return scatter_nd_update_p.bind(
    data, indices, updates, mode=mode, unique_indices=bool(unique_indices)
  )


# StridedSlice-1 --------------------------------------------------------------

_SPEC_NAMES = (
  "begin",
  "end",
  "strides",
  "begin_mask",
  "end_mask",
  "new_axis_mask",
  "shrink_axis_mask",
  "ellipsis_mask",
)


def _strided_slice_impl(data, *, batch_ndim, **spec):
  fn = functools.partial(_ops().strided_slice, **spec)
  for _ in range(batch_ndim):
    fn = jax.vmap(fn)
  return _normal(fn, data)


def _strided_slice_abstract(data, *, batch_ndim, **spec):
  shape = with_symbolic_dims(
    lambda d: _ops().shapes.strided_slice(d, **spec),
    [data.shape[batch_ndim:]],
    "StridedSlice-1",
  )
  return _shaped(data.shape[:batch_ndim] + shape, data.dtype)


def _strided_slice_batch(args, dims, *, batch_ndim, **spec):
  (data,), (dim,) = args, dims
  data = _move_to(data, dim, 0)
  return strided_slice_p.bind(data, batch_ndim=batch_ndim + 1, **spec), 0


strided_slice_p = _define(
  "jaxops_strided_slice",
  _strided_slice_impl,
  _strided_slice_abstract,
  _strided_slice_batch,
)


def _hashable(value: Any) -> Any:
  """A static attribute as a hashable primitive parameter."""
  if value is None or isinstance(value, (int, np.integer)):
    return value if value is None else operator.index(value)
  return tuple(int(v) for v in np.asarray(value).reshape(-1).tolist())


def strided_slice(data: Any, *spec: Any) -> jax.Array:
  """`jaxops.strided_slice` while exporting; `spec` in positional order."""
  ops = _ops()
  _validate(lambda d: ops.strided_slice(d, *spec), data)
  params = dict(zip(_SPEC_NAMES, map(_hashable, spec)))
  return strided_slice_p.bind(jnp.asarray(data), batch_ndim=0, **params)


def slice_plan(
  data_shape: tuple[int, ...], spec: dict[str, Any]
) -> tuple[list[tuple[int, int, int, int]], tuple[int, ...], tuple[int, ...]]:
  """The ONNX Slice of a StridedSlice spec on `data_shape`.

  Returns `(slices, sliced_shape, out_shape)`: `(axis, start, end, step)` for
  every dim the Slice changes (a negative step walks backwards; an end of
  `-size - 1` is "before element 0"), the shape after the Slice, and the
  shape after the new and shrunk axes.
  """
  return with_symbolic_dims(
    lambda shape: _slice_plan(shape, spec), [data_shape], "StridedSlice-1"
  )


def _slice_plan(data_shape: tuple[int, ...], spec: dict[str, Any]) -> Any:
  from jaxops import _strided_slice

  plan = _strided_slice._plan(data_shape, **spec)
  slices, sliced_shape = [], []
  for axis, (size, lo, hi, step) in enumerate(
    zip(data_shape, plan.start, plan.limit, plan.step)
  ):
    sliced_shape.append(len(range(lo, hi, step)))
    if axis in plan.reverse:
      # The elements hi - 1, hi - 1 - step, ..., lo.
      slices.append((axis, hi - 1, lo - 1 if lo > 0 else -size - 1, -step))
    elif (lo, hi, step) != (0, size, 1):
      slices.append((axis, lo, hi, step))
  return slices, tuple(sliced_shape), plan.out_shape
