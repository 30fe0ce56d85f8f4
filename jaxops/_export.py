"""The export switch, and the helpers every operator's export primitive uses.

While `exporting()` is on -- only `jaxops.onnx.to_onnx` turns it on -- each
public operator hands its arguments to its own export entry (a one-line hook
at its top: `if _export.active(): return _exported(...)`) instead of tracing
its XLA lowering. The entry, in the operator's module next to the operator,
validates the call exactly as the operator does (`validate`: it traces the
operator abstractly, so every error is the operator's own), canonicalizes the
static attributes and binds the operator's primitive (`primitive`,
`batch_ndim_primitive`).
The primitive's ONNX lowering is the operator's module in `jaxops.onnx`
(docs/export.md, docs/design.md#adding-an-operator).

Every primitive has an abstract evaluation from the public shape rule (through
`with_symbolic_dims`), an implementation that is the normal operator
computation (`normal`; also its XLA lowering) and a batching rule that keeps a
batched call one primitive wherever the node can express it. They have no
derivative rules: an exported function is a forward computation.

This module imports no operator and no exporter. The switch is a JAX config
state in the trace context where this JAX version lets a library declare one,
so a `jax.jit` cache never hands a program traced while exporting to a normal
call, or the other way round.
"""

from __future__ import annotations

import contextlib
import functools
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

from jaxops import _values
from jaxops._common import as_array_like, op_error

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


def normal(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
  """`fn(*args, **kwargs)` computed the normal way, primitives off."""
  if _state() == _OFF:
    return fn(*args, **kwargs)
  with _set_state(_NORMAL):
    return fn(*args, **kwargs)


# Stand-ins for symbolic dims: two ranges far from any real dim.
_STAND_INS = (1 << 20, 1 << 21)


def is_int(dim: Any) -> bool:
  """Whether a dim is a concrete int (not a symbolic dim)."""
  return isinstance(dim, (int, np.integer))


def _symbols(shapes: Any) -> list[Any]:
  """The distinct symbolic (non-int) dims of `shapes`, in order."""
  symbols: list[Any] = []
  for shape in shapes:
    for dim in shape:
      if not is_int(dim) and str(dim) not in map(str, symbols):
        symbols.append(dim)
  return symbols


def _stand_in(shape: Any, symbols: list[Any], base: int) -> tuple[int, ...]:
  names = [str(symbol) for symbol in symbols]
  return tuple(
    int(dim) if is_int(dim) else base + names.index(str(dim)) for dim in shape
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


def validate(call: Callable[..., Any], *arrays: Any) -> None:
  """Traces `call(*arrays)` (the operator) abstractly, raising its errors.

  Concrete (non-traced) arrays stay concrete in a closure, so the operator's
  eager checks of concrete indices run as they normally do. Symbolic dims are
  replaced by concrete stand-ins, as in `with_symbolic_dims`: an ONNX node
  gets the operator's rule at a concrete size.
  """
  shapes = [np.shape(a) if hasattr(a, "shape") else () for a in arrays]
  symbols = _symbols(shapes)
  if not symbols:
    normal(jax.eval_shape, lambda: call(*arrays))
    return
  specs = [
    jax.ShapeDtypeStruct(_stand_in(a.shape, symbols, _STAND_INS[0]), a.dtype)
    if hasattr(a, "shape")
    else np.asarray(a)
    for a in arrays
  ]
  normal(jax.eval_shape, call, *specs)


def validated(
  call: Callable[..., Any], data: Any, indices: Any, *updates: Any
) -> tuple[jax.Array, ...]:
  """`validate(call, data, indices, *updates)`, then those operands as JAX
  arrays: indices by `index_array`, updates in data's dtype."""
  validate(call, data, indices, *updates)
  data = jnp.asarray(data)
  return (
    data,
    index_array(indices),
    *(jnp.asarray(as_array_like(u), dtype=data.dtype) for u in updates),
  )


def abstract_eval(
  rule: Callable[..., Any], op: str, params: tuple[str, ...] = ()
) -> Callable[..., jax.core.ShapedArray]:
  """An abstract evaluation from a shape rule over the operands' shapes: the
  output has `rule(*shapes, **those_params)` (symbolic dims passed through)
  and the first operand's dtype. Only the static parameters named in `params`
  are the rule's business, passed by name."""

  def evaluate(*operands: Any, **static: Any) -> jax.core.ShapedArray:
    shaped = functools.partial(rule, **{name: static[name] for name in params})
    shape = with_symbolic_dims(shaped, [x.shape for x in operands], op)
    return jax.core.ShapedArray(shape, operands[0].dtype)

  return evaluate


def index_array(indices: Any) -> jax.Array:
  """Indices as a JAX array, lists and NumPy arrays included."""
  return _values.index_array(indices)


def hashable(value: Any) -> Any:
  """A static int or int sequence as a hashable primitive parameter."""
  if value is None or isinstance(value, (int, np.integer)):
    return value if value is None else operator.index(value)
  return tuple(int(v) for v in np.asarray(value).reshape(-1).tolist())


def primitive(
  name: str,
  fn: Callable[..., Any],
  abstract: Callable[..., Any],
  batching_rule: Callable[..., Any],
) -> Primitive:
  """The export primitive `name` of the operator `fn`: bound with operands
  and static parameters, it computes `fn(*operands, **params)` the normal way
  (its impl, also its XLA lowering); `abstract` is its abstract evaluation
  (`abstract_eval`), `batching_rule` its batching rule."""
  return _define(name, functools.partial(normal, fn), abstract, batching_rule)


def batch_ndim_primitive(
  name: str, fn: Callable[..., Any], shape_rule: Callable[..., Any], op: str
) -> Primitive:
  """The export primitive `name` of a one-operand operator `fn(data, **spec)`
  whose static spec (the primitive's parameters but `batch_ndim`) applies to
  `data.shape[batch_ndim:]`: the leading `batch_ndim` dims come from `vmap`,
  each one more leading dim of the same node; `shape_rule(shape, **spec)` is
  the operator's shape rule."""

  def impl(data: Any, *, batch_ndim: int, **spec: Any) -> Any:
    call = functools.partial(fn, **spec)
    for _ in range(batch_ndim):
      call = jax.vmap(call)
    return normal(call, data)

  def abstract(data: Any, *, batch_ndim: int, **spec: Any) -> Any:
    shape = with_symbolic_dims(
      lambda d: shape_rule(d, **spec), [data.shape[batch_ndim:]], op
    )
    return jax.core.ShapedArray(data.shape[:batch_ndim] + shape, data.dtype)

  def batch(args: Any, dims: Any, *, batch_ndim: int, **spec: Any) -> Any:
    (data,), (dim,) = args, dims
    data = move_to(data, dim, 0)
    return prim.bind(data, batch_ndim=batch_ndim + 1, **spec), 0

  prim = _define(name, impl, abstract, batch)
  return prim


def _define(
  name: str,
  impl: Callable[..., Any],
  abstract: Callable[..., Any],
  batching_rule: Callable[..., Any],
) -> Primitive:
  """A primitive: `impl` is also its XLA lowering."""
  prim = Primitive(name)
  prim.def_impl(impl)
  prim.def_abstract_eval(abstract)
  mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
  batching.primitive_batchers[prim] = batching_rule
  return prim


# Batching-rule helpers.

# What a batching rule gets for an operand vmap does not map (None in recent
# JAX versions).
_NOT_MAPPED = getattr(batching, "not_mapped", None)


def mapped(dim: Any) -> bool:
  """Whether a batching rule's operand dim is a mapped one."""
  return dim is not _NOT_MAPPED


def batch_size(args: Any, dims: Any) -> int:
  """The size of the vmapped dim, from the first mapped operand."""
  return next(x.shape[d] for x, d in zip(args, dims) if mapped(d))


def move_to(x: jax.Array, axis: int, to: int) -> jax.Array:
  return x if axis == to % x.ndim else jnp.moveaxis(x, axis, to)


def broadcast_front(x: jax.Array, size: int) -> jax.Array:
  return lax.broadcast(x, (size,))


def broadcast_back(x: jax.Array, size: int) -> jax.Array:
  return lax.broadcast_in_dim(x, x.shape + (size,), tuple(range(x.ndim)))


def batched_in_front(args: Any, dims: Any) -> list[jax.Array]:
  """Every operand with the vmapped dim in front, an unmapped one broadcast."""
  size = batch_size(args, dims)
  return [
    move_to(x, d, 0) if mapped(d) else broadcast_front(x, size)
    for x, d in zip(args, dims)
  ]
