"""Helpers shared by every operator: error formatting, static-attribute
canonicalization, shapes with symbolic dims and index normalization.

Everything here runs at trace time on Python values and shapes, except
`prepare_indices` and `linear_index`, which emit a few cheap elementwise ops
and a reduction on the (possibly traced) index array. The rules they apply
(error form, static attributes, index dtypes, negative and out-of-range
indices) are in docs/semantics.md.

Shapes may hold the symbolic dims of `jax.export` (`shape_dims`,
docs/export.md#symbolic-dims). A symbolic dim is at least 1 and otherwise
any size its dimension values hold: int64 with x64 on, int32 with it off
(jax.export computes every dim in that type). Every choice made here from a
size takes, for a symbolic one, a path valid for all of them: `provable`
decides a comparison only where it holds for every size, `dim_values` turns
sizes into run-time values, and `prepare_indices` normalizes indices in the
dimension values' width against run-time bounds.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as pe

# A shape's dims: ints, and the symbolic dims of jax.export (`shape_dims`).
Shape = tuple[Any, ...]
# Public argument types. Arrays: NumPy or JAX arrays, tracers, Python scalars
# and (nested) lists. Static attributes: a Python or NumPy int; a sequence of
# ints (list, tuple or concrete 1-D array); a mask as 0/1 entries or an int
# bitfield; a shape as a sequence of ints.
ArrayLike = jax.typing.ArrayLike | Sequence[Any]
IntLike = int | np.integer
IntSequence = Sequence[IntLike] | np.ndarray
Mask = IntSequence | int
ShapeLike = Sequence[IntLike] | np.ndarray
GatherMode = Literal["fill", "clip", "promise_in_bounds"]
ScatterMode = Literal["drop", "clip", "promise_in_bounds"]


def op_error(
  op: str, message: str, exc: type[Exception] = ValueError
) -> Exception:
  """Returns `exc` with the message prefixed by the operator's versioned name.

  Callers `raise op_error(...)`, so that tracebacks point at the rule that
  failed rather than at this helper.
  """
  return exc(f"{op}: {message}")


def _is_tracer(x: Any) -> bool:
  return isinstance(x, jax.core.Tracer)


def static_int(value: Any, op: str, name: str) -> int:
  """Canonicalizes a static integer attribute (a Python or NumPy int)."""
  if _is_tracer(value):
    raise op_error(
      op,
      f"{name} must be a static Python int, got a traced value {value}; "
      "pass it as a static argument (e.g. jax.jit(..., static_argnames=...))",
      TypeError,
    )
  if isinstance(value, (bool, np.bool_)):
    raise op_error(op, f"{name} must be an int, got bool {value!r}", TypeError)
  if isinstance(value, np.ndarray) and value.ndim == 0:
    value = value.item()
  try:
    return operator.index(value)
  except TypeError:
    raise op_error(
      op,
      f"{name} must be an int, got {type(value).__name__} {value!r}",
      TypeError,
    ) from None


def static_int_tuple(values: Any, op: str, name: str) -> tuple[int, ...]:
  """Canonicalizes a static int sequence (list, tuple or concrete 1-D array)."""
  if _is_tracer(values):
    raise op_error(
      op,
      f"{name} must be static (a Python sequence of ints or a NumPy "
      f"array), got a traced value {values}; pass it as a static argument",
      TypeError,
    )
  if isinstance(values, jax.Array):
    values = np.asarray(values)
  if isinstance(values, np.ndarray):
    if values.ndim != 1:
      raise op_error(
        op,
        f"{name} must be 1-D, got an array of shape {values.shape}",
        ValueError,
      )
    if not (np.issubdtype(values.dtype, np.integer) or values.size == 0):
      raise op_error(
        op, f"{name} must hold integers, got dtype {values.dtype}", TypeError
      )
    values = values.tolist()
  if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
    raise op_error(
      op,
      f"{name} must be a sequence of ints, got "
      f"{type(values).__name__} {values!r}",
      TypeError,
    )
  return tuple(static_int(v, op, f"{name}[{i}]") for i, v in enumerate(values))


def static_shape(shape: Any, op: str, name: str) -> Shape:
  """Canonicalizes a shape given to a shape rule; dims must be ints >= 0."""
  dims = static_int_tuple(shape, op, f"{name} shape")
  if any(d < 0 for d in dims):
    raise op_error(op, f"{name} shape {dims} has a negative dim")
  return dims


def jit_disabled() -> bool:
  """Whether JAX runs each primitive on its own (`jax.disable_jit()`)."""
  # Read as JAX says to read a flag with a context manager; its config type
  # does not declare the attribute.
  return bool(jax.config.jax_disable_jit)  # type: ignore[attr-defined]


def is_symbolic(dim: Any) -> bool:
  """Whether a dim is a symbolic dim of `jax.export` rather than an int."""
  return jax.export.is_symbolic_dim(dim)


def shape_dims(shape: Any, op: str, name: str) -> Shape:
  """Canonicalizes a shape given to a shape rule whose dims may be symbolic.

  Ints must be >= 0, as in `static_shape`; a symbolic dim of `jax.export`
  (at least 1 by jax.export's rule) passes through as it is, for the rule to
  carry or to decide on with `provable`.
  """
  if isinstance(shape, Sequence) and any(map(is_symbolic, shape)):
    return tuple(
      d if is_symbolic(d) else static_shape((d,), op, f"{name}[{i}]")[0]
      for i, d in enumerate(shape)
    )
  return static_shape(shape, op, name)


def concrete_dim(dim: Any, op: str, what: str) -> int:
  """`dim`, or the operator's TypeError saying that `what` (a dim the rule
  needs as a number, e.g. "indices shape[-1] (the index tuple length)")
  must be concrete where jax.export gave a symbolic dim."""
  if is_symbolic(dim):
    raise op_error(
      op,
      f"{what} must be an int, got the symbolic dim {dim}: it is static "
      "(export with a concrete size there)",
      TypeError,
    )
  return dim


# Newer jax has it in jax.errors; jax 0.8 in jax.core only (since deprecated).
_INCONCLUSIVE: type[Exception] = (
  getattr(jax.errors, "InconclusiveDimensionOperation", None)
  or jax.core.InconclusiveDimensionOperation
)


def provable(
  compare: Callable[[Any, Any], Any], left: Any, right: Any
) -> bool | None:
  """`compare(left, right)` of dims (an `operator` comparison): True or
  False where it holds or fails for every size of the symbolic dims in it,
  None where it depends on them (`jax.errors.
  InconclusiveDimensionOperation`). Equality of symbolic dims is False
  unless it always holds (jax.export's rule)."""
  try:
    return bool(compare(left, right))
  except _INCONCLUSIVE:
    return None


def symbolic_constraint_hint(*dims: Any) -> str:
  """The advice for a rule that holds for some sizes of symbolic dims only
  (empty where every dim is an int)."""
  names = sorted({str(d) for d in dims if is_symbolic(d)})
  if not names:
    return ""
  return (
    f"; it must hold for every size of the symbolic dims {names}: give "
    "jax.export.symbolic_shape the constraint that makes it so"
  )


def dim_values(sizes: Sequence[Any], dtype: Any) -> Any:
  """The 1-D `sizes` as values of the integer `dtype`: a NumPy constant
  where all are ints (exact: the int64 value cast), else a JAX array whose
  symbolic entries are computed at run time (`jnp.asarray` of a symbolic dim
  is its value, in the dimension values' type)."""
  if not any(map(is_symbolic, sizes)):
    return np.asarray(sizes, dtype=np.int64).astype(dtype)
  return jnp.stack(
    [lax.convert_element_type(jnp.asarray(d), dtype) for d in sizes]
  )


def dim_value(dim: Any, dtype: Any) -> Any:
  """One dim as a scalar of the integer `dtype` (`dim_values` of one)."""
  return dim_values((dim,), dtype)[0]


def dim_value_bits() -> int:
  """The width of jax.export's dimension values in this x64 mode (64 or
  32): every symbolic dim's size fits a signed integer of that width."""
  return jnp.iinfo(jax.dtypes.canonicalize_dtype(np.int64)).bits


def canonicalize_axis(
  axis: Any, rank: int, op: str, name: str = "axis", *, context: str = ""
) -> int:
  """Maps an axis in [-rank, rank - 1] to [0, rank - 1].

  `context` (e.g. "(data shape (2, 3))") is appended to the error message so
  that it names the shapes the rank came from.
  """
  axis = static_int(axis, op, name)
  if not -rank <= axis < rank:
    raise op_error(
      op,
      f"{name}={axis} must be in [-r, r-1] = [{-rank}, {rank - 1}] "
      f"for rank r={rank}" + (f" {context}" if context else ""),
    )
  return axis % rank


def check_same_rank(
  data_shape: Shape, indices_shape: Shape, op: str, context: str
) -> None:
  """The operator's error unless indices have data's rank."""
  r = len(data_shape)
  if len(indices_shape) != r:
    raise op_error(
      op,
      f"rank(indices)={len(indices_shape)} must equal rank(data)={r} {context}",
    )


def check_elements_dims(
  data_shape: Shape, indices_shape: Shape, axis: Any, op: str, context: str
) -> None:
  """The operator's error unless `axis` is valid and every indices dim but
  the axis's is at most data's, for every size of symbolic dims: the rule of
  the Elements operators (indices of data's rank)."""
  a = canonicalize_axis(axis, len(data_shape), op, context=context)
  for d, (n_data, n_idx) in enumerate(zip(data_shape, indices_shape)):
    if d != a and not provable(operator.le, n_idx, n_data):
      raise op_error(
        op,
        f"indices.shape[{d}]={n_idx} must be <= data.shape[{d}]={n_data} "
        f"in every dim other than axis={a} {context}"
        + symbolic_constraint_hint(n_idx, n_data),
      )


def as_indices(
  indices: Any, op: str, name: str = "indices"
) -> jax.Array | np.ndarray:
  """Turns Python lists into NumPy arrays and rejects non-integer dtypes.

  Arrays and tracers pass through unchanged, so concrete host indices can
  still be bounds-checked without a device round trip. A list of Python ints
  that NumPy makes float64 or object (values beyond int64) is uint64 when
  that holds it; otherwise its first value beyond int64 (or uint64) is out of
  range for every dim: an IndexError.
  """
  array = as_array_like(indices, op, name)
  if not isinstance(indices, (jax.Array, np.ndarray, jax.core.Tracer)):
    array = _python_ints(indices, array, op, name)
  check_index_dtype(array.dtype, op, name, shape=array.shape)
  return array


def _python_ints(value: Any, array: Any, op: str, name: str) -> Any:
  """`array` (NumPy's for the Python `value`), as uint64 where it holds ints
  only beyond int64, or an IndexError where no index dtype holds them."""
  if array.dtype.kind not in "fO":
    return array
  try:
    objects = np.array(value, dtype=object)
  except ValueError:
    return array  # Ragged: the dtype check names it.
  flat = objects.reshape(-1).tolist()
  if not flat or not all(type(v) is int for v in flat):
    return array
  uint64 = np.iinfo(np.uint64)
  low, high = (0, uint64.max) if min(flat) >= 0 else (_INT64.min, _INT64.max)
  for position, v in enumerate(flat):
    if not low <= v <= high:
      raise op_error(
        op,
        f"{name}{list(_unravel(position, objects.shape))}={v} is out of "
        "range for every dim: no index dtype holds it (int64, or uint64 "
        "for a list without negative values)",
        IndexError,
      )
  return objects.astype(np.uint64)


_INT64 = np.iinfo(np.int64)


def _unravel(position: int, shape: Sequence[int]) -> tuple[int, ...]:
  """`np.unravel_index` for any rank (NumPy's stops at 64 dims)."""
  out = []
  for n in reversed(shape):
    position, i = divmod(position, n)
    out.append(i)
  return tuple(reversed(out))


def as_array_like(
  value: Any, op: str | None = None, name: str = ""
) -> jax.Array | np.ndarray:
  """An array for `value`: arrays and tracers as they are, Python values as
  NumPy arrays, or as a JAX array when they hold tracers (a list argument of a
  jitted call arrives as a list of tracers).

  With `op`, a ragged nested sequence raises that operator's ValueError
  naming the argument `name` (docs/semantics.md#bad-input); without, the
  value has passed an operator's checks already.
  """
  if isinstance(value, (jax.Array, np.ndarray, jax.core.Tracer)):
    return value
  try:
    if any(_is_tracer(leaf) for leaf in jax.tree.leaves(value)):
      return jnp.asarray(value)
    return np.asarray(value)
  except (TypeError, ValueError) as error:
    if op is not None:
      raise_if_ragged(value, op, name, error)
    raise


def raise_if_ragged(value: Any, op: str, name: str, cause: Exception) -> None:
  """Raises `op`'s ValueError for `name` where `value`, which failed to
  convert with `cause`, is a ragged nested sequence; returns otherwise."""
  if _nested_shape(value) is None:
    raise op_error(
      op, f"{name} must be an array, got a ragged nested sequence ({cause})"
    ) from cause


def _nested_shape(value: Any) -> tuple[int, ...] | None:
  """The shape of nested lists and tuples (of arrays, tracers or scalars),
  or None where they are ragged. Reads shapes only, never values: a list
  may hold tracers."""
  if not isinstance(value, (list, tuple)):
    return np.shape(value)
  shapes = {_nested_shape(item) for item in value}
  inner = shapes.pop() if len(shapes) == 1 else () if not shapes else None
  return None if inner is None else (len(value), *inner)


def check_index_dtype(
  dtype: Any,
  op: str,
  name: str = "indices",
  *,
  shape: Sequence[int] | None = None,
) -> None:
  """Rejects non-integer index arrays with a TypeError.

  With `shape`, the message also names the shape of the offending array.
  """
  if not jnp.issubdtype(dtype, jnp.integer):
    where = "" if shape is None else f" ({name} shape {shape_str(shape)})"
    raise op_error(
      op,
      f"{name} must have an integer dtype, got {np.dtype(dtype).name}{where}",
      TypeError,
    )


def canonicalize_mode(
  mode: Any, op: str, allowed: Sequence[str]
) -> lax.GatherScatterMode:
  """Parses the keyword-only out-of-range `mode` of an operator."""
  if mode not in allowed:
    raise op_error(op, f"mode={mode!r} must be one of {tuple(allowed)}")
  return lax.GatherScatterMode.from_any("fill" if mode == "drop" else mode)


def prepare_indices(indices: jax.Array, sizes: Any) -> jax.Array:
  """Casts narrow index dtypes up, wraps negative indices and clips huge ones.

  `sizes` are the data dims that `indices[..., j]` index (broadcast along the
  last axis of `indices`), or a single size for element-wise indices.

  Indices narrower than 32 bits are widened first, so that `i + size` cannot
  overflow (an int8 index into a dim of 300). Unsigned indices are never
  negative and are not wrapped. An index still negative after the wrap (below
  -size) stays negative, so the out-of-range `mode` applies to it.

  Index values outside the int32 range (int64, uint32 and uint64 indices) are
  clipped into it when every indexed dim fits in int32: XLA's fill-mode gather
  and drop-mode scatter convert indices to the narrowest int type holding the
  operand's dims, which wraps 2**32 + 1 around to 1, an in-range index. After
  the clip such an index is still out of range, so `mode` treats it as one.

  A symbolic size may be anything its dimension value holds, so there the
  indices are first widened to the dimension values' width (int32 indices
  become int64 with x64 on: a negative index wraps to `i + size`, which may
  pass int32) and the wrapped indices are clipped into `[-1, size]`, a bound
  computed at run time: an in-range index is unchanged, any other stays out
  of range and within every type XLA may narrow it to
  (docs/export.md#symbolic-index-widths).
  """
  dtype = indices.dtype
  scalar = not isinstance(sizes, Sequence)
  sizes = (sizes,) if scalar else tuple(sizes)
  symbolic = any(map(is_symbolic, sizes))
  bits = jnp.iinfo(dtype).bits
  unsigned = jnp.issubdtype(dtype, jnp.unsignedinteger)
  if symbolic and bits < dim_value_bits():
    bits = dim_value_bits()
    indices = indices.astype(jnp.dtype(f"{'u' if unsigned else ''}int{bits}"))
  elif bits < 32:
    indices = indices.astype(jnp.int32)
  bounds = dim_values(sizes, indices.dtype)
  bounds = bounds[0] if scalar else along_last_axis(bounds, indices.ndim)
  if not unsigned:
    indices = jnp.where(indices < 0, indices + bounds, indices)
  if symbolic:
    if unsigned:
      return jnp.minimum(indices, bounds)
    return jnp.clip(indices, np.asarray(-1, indices.dtype), bounds)
  int32 = np.iinfo(np.int32)
  fits_int32 = all(s <= int32.max for s in sizes)
  info = jnp.iinfo(indices.dtype)
  if fits_int32 and info.max > int32.max:
    upper = np.asarray(int32.max, dtype=indices.dtype)
    if unsigned:
      indices = jnp.minimum(indices, upper)
    else:
      lower = np.asarray(int32.min, dtype=indices.dtype)
      indices = jnp.clip(indices, lower, upper)
  return indices


def batched_like(indices: jax.Array, data: jax.Array) -> jax.Array:
  """`indices`, carrying `data`'s vmapped dims where `data` has them.

  Outside `vmap`, and where `indices` are batched too, this is `indices`.
  Under a `vmap` that batches `data` only, the indices are broadcast to the
  batch, so that the gather that follows takes the batched path (the vmapped
  dim a batching dim of operand and indices), as the equivalent call on one
  more leading axis does. `lax.gather`'s own rule for a batched operand and
  shared indices reads the batch as a slice window instead; its transpose is
  a scatter-add of windows strided by a whole example, twice as slow on
  XLA:CPU (docs/design.md#vmap-shared-indices). `data` is read for its
  batching only: it is cut from the derivative, and known indices stay known
  when `data` is not (`jax.linear_transpose` traces data as unknown, and a
  gather whose indices follow it cannot be transposed).
  """
  return batched_like_p.bind(*vary_alike(indices, lax.stop_gradient(data)))


batched_like_p = Primitive("jaxops_batched_like")
batched_like_p.def_impl(lambda indices, data: indices)
batched_like_p.def_abstract_eval(lambda indices, data: indices)
mlir.register_lowering(batched_like_p, lambda ctx, indices, data: [indices])


def _batched_like_batch(args, dims):
  (indices, data), (indices_dim, data_dim) = args, dims
  if indices_dim is not None or data_dim is None:
    return indices, indices_dim
  size = data.shape[data_dim]
  return lax.broadcast(indices, (size,)), 0


def _batched_like_jvp(primals, tangents):
  out = batched_like_p.bind(*primals)
  return out, float0_zeros(out.shape)


def _batched_like_partial_eval(trace, indices, data):
  if indices.pval.is_known():
    return indices
  return trace.default_process_primitive(batched_like_p, (indices, data), {})


batching.primitive_batchers[batched_like_p] = _batched_like_batch
ad.primitive_jvps[batched_like_p] = _batched_like_jvp
pe.custom_partial_eval_rules[batched_like_p] = _batched_like_partial_eval


def along_last_axis(values: np.ndarray, ndim: int) -> Any:
  """The 1-D `values` shaped `(1,) * (ndim - 1) + (k,)`, to combine with the
  last axis of a rank-`ndim` array at an explicit rank (so that
  `jax_numpy_rank_promotion="raise"` holds): a NumPy constant, or beyond
  NumPy's 64 dims a JAX one (JAX arrays have more)."""
  shape = (1,) * (ndim - 1) + values.shape
  if ndim <= 64:
    return values.reshape(shape)
  return lax.broadcast_in_dim(values, shape, (ndim - 1,))


def linear_index(
  indices: jax.Array, sizes: Sequence[Any], dtype: Any, *, by_columns=False
) -> jax.Array:
  """The row-major linear index, in `dtype`, of each `(..., k)` tuple of
  in-range indices into the dims `sizes`.

  One multiply by a constant stride vector and one reduction over the last
  axis, never per-component slices (XLA:CPU emits those as strided scalar
  code inside a consuming gather's loop: docs/design.md#tried-gather-vector).
  `by_columns`: Horner's rule over the k columns instead, for an index that
  is materialized (a scatter's): element-wise only, it fuses with the wrap
  and the range test before it into one loop, where the reduction starts a
  fusion of its own (docs/design.md#index-fusion). With symbolic sizes the
  strides are computed at run time.
  """
  if by_columns:
    index = jnp.zeros(indices.shape[:-1], dtype)
    for j, size in enumerate(sizes):
      column = indices[..., j].astype(dtype)
      index = column if j == 0 else index * dim_value(size, dtype) + column
    return index
  if any(map(is_symbolic, sizes)):
    products = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
    strides = dim_values(products, dtype)
  else:
    strides = np.cumprod((1,) + tuple(sizes[:0:-1]))[::-1].astype(dtype)
  terms = indices.astype(dtype) * along_last_axis(strides, indices.ndim)
  return jnp.sum(terms, axis=-1, dtype=dtype)


def check_concrete_bounds(
  indices: Any, sizes: Sequence[Any] | Any, op: str, name: str = "indices"
) -> None:
  """Raises IndexError for concrete out-of-range indices.

  Tracers (anything under jit/vmap/grad) are skipped: jit cannot raise on
  values, so the traced path relies on `mode` and on `checkify`. Concrete jax
  arrays are read back to the host here, which is a sync on the eager path
  only. Against a symbolic size an index raises only where it is out of
  range for every size the dim can take (`provable`); otherwise `mode`
  decides at run time, as for traced indices.
  """
  if _is_tracer(indices):
    return
  shape = np.shape(indices)
  if not math.prod(shape):
    return
  # As (n, last) rows: NumPy arrays stop at 64 dims, JAX arrays do not.
  rows = (-1, shape[-1]) if shape else (1, 1)
  values = np.asarray(
    jnp.reshape(indices, rows) if len(shape) > 64 else indices
  ).reshape(rows)
  unsigned = np.issubdtype(values.dtype, np.unsignedinteger)
  # uint64 values above 2**63 would wrap negative as int64: compare them
  # unsigned (they are never negative, so only the upper bound applies).
  values = values.astype(np.uint64 if unsigned else np.int64)
  columns = values.shape[1]
  per_column = list(sizes) if isinstance(sizes, Sequence) else [sizes]
  if any(map(is_symbolic, per_column)):
    per_column = per_column * (columns // len(per_column))
    bad = np.stack(
      [
        _out_of_range(values[:, j], n, unsigned)
        for j, n in enumerate(per_column)
      ],
      axis=1,
    )
  else:
    sizes_arr = np.asarray(sizes, dtype=values.dtype)
    bad = values >= sizes_arr
    if not unsigned:
      bad |= values < -sizes_arr
  if bad.any():
    row, column = (int(p) for p in np.argwhere(bad)[0])
    position = _unravel(row * values.shape[1] + column, shape)
    size = per_column[column if len(per_column) > 1 else 0]
    raise op_error(
      op,
      f"{name}{list(position)}={values[row, column]} is out of range for "
      f"a dim of size {size} (valid: [-s, s-1])",
      IndexError,
    )


def _out_of_range(column: np.ndarray, size: Any, unsigned: bool) -> Any:
  """Which of `column`'s values are out of range for the dim `size`; for a
  symbolic size, those out of range for every size it can take."""
  if not is_symbolic(size):
    bad = column >= np.asarray(size, column.dtype)
    return bad if unsigned else bad | (column < -size)
  out = [
    v
    for v in np.unique(column).tolist()
    if provable(operator.ge, v, size)
    or (not unsigned and provable(operator.lt, v, -size))
  ]
  return np.isin(column, np.asarray(out, column.dtype))


def fill_value_or_default(fill_value: Any, dtype: Any) -> Any:
  """`fill_value`, or JAX's default fill for out-of-range gather reads.

  The default (as in `jnp.take`) is NaN for inexact dtypes, True for bool,
  the minimum of signed ints and the maximum of unsigned ints.
  """
  if fill_value is not None:
    return fill_value
  if jnp.issubdtype(dtype, jnp.inexact):
    return jnp.nan
  if jnp.issubdtype(dtype, jnp.bool_):
    return True
  if jnp.issubdtype(dtype, jnp.signedinteger):
    return jnp.iinfo(dtype).min
  return jnp.iinfo(dtype).max


def _varying_axes(x: Any) -> frozenset:
  """The shard_map manual axes `x` varies over (none outside shard_map)."""
  aval = jax.typeof(x)
  axes: Any = getattr(aval, "vma", None)  # jax < 0.9
  if axes is None:
    axes = getattr(getattr(aval, "mat", None), "varying", ())
  return frozenset(axes)


def vary_alike(*xs: jax.Array) -> list[jax.Array]:
  """`xs`, each typed to vary over every shard_map manual axis that any of
  them varies over, as JAX does for its own primitives' operands: a custom
  primitive's result type can then copy any operand's, and a loop carry
  built from constants (a neutral fill) keeps its type through the loop."""
  axes = frozenset().union(*map(_varying_axes, xs))
  out = []
  for x in xs:
    missing = tuple(sorted(axes - _varying_axes(x), key=str))
    if missing:
      if hasattr(lax, "pcast"):  # jax >= 0.9
        x = lax.pcast(x, missing, to="varying")
      else:
        x = lax.pvary(x, missing)  # type: ignore[attr-defined]
    out.append(x)
  return out


def batch_in_front(
  args: Sequence[jax.Array],
  dims: Sequence[int | None],
  broadcast: Callable[[jax.Array, int], jax.Array] | None = None,
) -> tuple[int, list[jax.Array]]:
  """For a batching rule: the batch size and every operand with its batch
  dim in front (unbatched operands broadcast to it, by `broadcast(x, size)`
  where given)."""
  size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
  if broadcast is None:
    broadcast = lambda x, size: lax.broadcast(x, (size,))
  return size, [
    jnp.moveaxis(x, d, 0) if d is not None else broadcast(x, size)
    for x, d in zip(args, dims)
  ]


def batched(fn: Callable[..., Any], batch: int) -> Callable[..., Any]:
  """`fn` mapped over `batch` leading dims of all its operands (`jax.vmap`
  once per dim): each batch member's gathers and scatters stay within it,
  so a sharding of the batch dims stays where it is."""
  for _ in range(batch):
    fn = jax.vmap(fn)
  return fn


def is_float0(tangent: Any) -> bool:
  """Whether `tangent` is the float0 tangent of an integer or bool primal."""
  return jnp.result_type(tangent) == jax.dtypes.float0


def float0_zeros(shape: Sequence[int]) -> np.ndarray:
  return np.zeros(shape, dtype=jax.dtypes.float0)


def shape_str(shape: Sequence[int]) -> str:
  return str(tuple(shape))


def shapes_context(**shapes: Sequence[Any]) -> str:
  """The operands' shapes as a shape rule's errors end with them:
  `(data shape (2, 3), indices shape (4,))`."""
  named = (f"{name} shape {shape_str(s)}" for name, s in shapes.items())
  return f"({', '.join(named)})"


def check_rank(rank: int, op: str, name: str, context: str) -> None:
  """The operator's error unless the operand `name` has rank >= 1."""
  if rank < 1:
    raise op_error(op, f"{name} must have rank >= 1, got rank 0 {context}")
