"""The bad-input driver: every operator's table of rejected inputs runs here.

Every error jaxops raises for bad input has one form: the operator and its
version, then `attribute=value`, the rule and the shapes
(docs/semantics.md). The tables live beside each operator's tests; this
module checks a row the same way for all four:

* `assert_op_error(op, exc, pattern, call)`: `call()` raises `exc`, whose
  message is `"{op}: "` followed by text that `pattern` matches
  (`re.search`, so `^` anchors right after the operator's name).
* `assert_rejected(...)`: the operator called eagerly, under `jax.jit` and
  under `jax.eval_shape`, and the public shape rule on the bare shapes, all
  raise that error at trace time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import pytest


def assert_op_error(
  op: str, exc: type[Exception], pattern: str, call: Callable[[], Any]
) -> None:
  """`call()` raises `exc` with the message `"{op}: " + text`, `pattern`
  matching `text`."""
  with pytest.raises(exc) as info:
    call()
  message = str(info.value)
  prefix = f"{op}: "
  assert message.startswith(prefix), message
  text = message[len(prefix) :]
  assert re.search(pattern, text), f"{pattern!r} not in {text!r}"


def assert_rejected(
  op: str,
  exc: type[Exception],
  pattern: str,
  *,
  operator: Callable[..., Any] | None = None,
  shape_rule: Callable[..., Any] | None = None,
  arrays: Sequence[tuple[tuple[int, ...], Any]] = (),
  attrs: dict[str, Any] | None = None,
) -> None:
  """`operator(*arrays, **attrs)` and `shape_rule(*shapes, **attrs)` raise
  the same error at trace time.

  Args:
    op: the operator's name and version, e.g. `"GatherND-8"`.
    exc, pattern: the exception type and a regex its message must match.
    operator: the public function, or None to check the shape rule alone
      (shapes no array can have, e.g. a negative dim).
    shape_rule: the public shape rule, or None where the error is about
      something the rule does not see (dtypes, modes).
    arrays: `(shape, dtype)` of each array argument, in order.
    attrs: the static arguments, by keyword.
  """
  attrs = attrs or {}
  if operator is not None:
    zeros = [np.zeros(shape, dtype) for shape, dtype in arrays]
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in arrays]

    def call(*args):
      return operator(*args, **attrs)

    assert_op_error(op, exc, pattern, lambda: call(*zeros))
    assert_op_error(op, exc, pattern, lambda: jax.jit(call)(*zeros))
    assert_op_error(op, exc, pattern, lambda: jax.eval_shape(call, *structs))
  if shape_rule is not None:
    shapes = [shape for shape, _ in arrays]
    assert_op_error(op, exc, pattern, lambda: shape_rule(*shapes, **attrs))
