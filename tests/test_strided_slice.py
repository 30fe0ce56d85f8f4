"""StridedSlice-1: every example of the spec (runtime values: errata SS-1 to
SS-11 in docs/semantics.md; "erratum N" below is SS-N there), mask forms, the
trace-time errors, dtypes, zero-size inputs, the lowering (no gather), vmap,
jit and derivatives, and a property test against NumPy basic indexing.

Expected values are NumPy indexing expressions (`tests/support/strided_slice.py`
for the spec examples), never the code under test.
"""

from __future__ import annotations

import re

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.test_util import check_grads

import jaxops
from jaxops import shapes
from tests.support import generators as gen
from tests.support import rejections
from tests.support.asserts import assert_same
from tests.support.strided_slice import SPEC_EXAMPLES, Spec, every_mask

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

ss = jaxops.strided_slice


def _arange(shape, dtype=np.int32):
  return np.arange(1, int(np.prod(shape)) + 1).astype(dtype).reshape(shape)


# ---------------------------------------------------------------------------
# The spec's examples (IR <layer> blocks and prose), with the runtime's values.


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: e.name)
def test_spec_example(example):
  spec = example.spec
  assert (
    shapes.strided_slice(spec.data_shape, spec.begin, spec.end, **spec.kwargs())
    == example.out_shape
  )
  if example.numpy_index is None:  # 10-/12-D data: shape only
    return
  # int8 keeps the 2M-element shrink example small; values need not be unique
  # there since the expected output is NumPy indexing of the same array.
  x = _arange(
    spec.data_shape, np.int8 if np.prod(spec.data_shape) > 10**6 else np.int32
  )
  want = example.numpy_index(x)
  assert want.shape == example.out_shape
  assert_same(ss(x, spec.begin, spec.end, **spec.kwargs()), want)
  jitted = jax.jit(lambda x: ss(x, spec.begin, spec.end, **spec.kwargs()))
  assert_same(jitted(x), want)


def test_erratum_8_reverse_begin_below_minus_size_clamps_to_0():
  x = np.array([0, 1, 2, 3], np.int32)
  assert_same(ss(x, [-10], [-20], [-1]), np.array([0], np.int32))
  assert x[-10:-20:-1].size == 0  # Python differs: the runtime wins


@pytest.mark.parametrize(
  "begin,end,stride,want",
  [
    (2, 2, 1, []),  # erratum 1: begin == end is empty
    (2, 2, -1, []),
    (3, 0, -1, [3, 2, 1]),  # erratum 3: end is exclusive
    (5, -7, -1, [3, 2, 1, 0]),
    (-5, 2, 1, [0, 1]),  # the prose: -5 + 4 = -1, clamped to 0
    (1234, 1234, 1, []),  # erratum 4
    (2, 4321, -1, []),
    (-1, -5, -2, [3, 1]),
    (4, -20, -3, [3, 0]),
  ],
)
def test_clamping_1d(begin, end, stride, want):
  x = np.array([0, 1, 2, 3], np.int32)
  assert_same(ss(x, [begin], [end], [stride]), np.array(want, np.int32))


@pytest.mark.parametrize("stride", [-1, -2, -3, 1, 2])
def test_begin_and_end_masks_cover_the_dim(stride):
  x = np.arange(7, dtype=np.int32)
  assert_same(
    ss(x, [99], [-99], [stride], begin_mask=[1], end_mask=[1]), x[::stride]
  )
  # erratum 2: a masked end with a negative stride runs through element 0.
  assert_same(ss(x, [5], [3], [stride], end_mask=[1]), x[5::stride])


def test_shrink_takes_begin_and_ignores_end_stride_and_begin_mask():
  x = _arange((4, 3))
  for end, stride in [(0, 1), (-1, -2), (99, 0)]:
    assert_same(ss(x, [-1], [end], [stride], shrink_axis_mask=[1]), x[-1])
  # erratum 10, decided: begin_mask on a shrunk dim is ignored (TF, OpenVINO's
  # reference evaluator); the CPU plugin would give x[0].
  assert_same(ss(x, [2], [0], [1], begin_mask=[1], shrink_axis_mask=[1]), x[2])


def test_new_axis_wins_over_shrink_at_one_position():  # erratum 6
  x = _arange((3, 4, 5))
  assert_same(
    ss(x, [0, 1], [0, 2], new_axis_mask=[1], shrink_axis_mask=[1, 1]),
    x[np.newaxis, 1],
  )


def test_ellipsis_wins_over_new_axis_and_shrink_at_one_position():
  x = _arange((3, 4, 5))  # erratum 10, decided (TF, OpenVINO shape inference)
  for collide in ("new_axis_mask", "shrink_axis_mask"):
    assert_same(
      ss(x, [0, 1], [0, 3], ellipsis_mask=[1], **{collide: [1]}), x[..., 1:3]
    )


def test_ellipsis_expansion_counts_new_axes():
  x = _arange((2, 3, 4, 5))
  # rank - (M - sum(new_axis_mask) - 1) = 4 - (4 - 1 - 1) = 2 dims.
  assert_same(
    ss(
      x,
      [1, 0, 0, 0],
      [2, 0, 0, 3],
      [1, 1, 1, -1],
      new_axis_mask=[0, 0, 1],
      ellipsis_mask=[0, 1],
      end_mask=[0, 0, 0, 1],
    ),
    x[1:2, ..., np.newaxis, 0::-1],
  )
  # An ellipsis that stands for no dims at all.
  assert_same(
    ss(x, [0, 0, 0, 0, 0], [1, 0, 1, 1, 1], ellipsis_mask=[0, 1]),
    x[0:1, ..., 0:1, 0:1, 0:1],
  )


def test_unnamed_trailing_dims_kept_whole_and_empty_spec():
  x = _arange((2, 3, 4))
  assert_same(ss(x, [1], [2]), x[1:2])
  assert_same(ss(x, [], []), x)
  assert_same(ss(x, [0], [0], new_axis_mask=[1]), x[np.newaxis])
  scalar = np.array(7, np.int32)
  assert_same(ss(scalar, [], []), scalar)
  assert_same(
    ss(scalar, [0, 0], [0, 0], new_axis_mask=[1, 1]),
    scalar[np.newaxis, np.newaxis],
  )


# ---------------------------------------------------------------------------
# Mask and attribute forms.


def test_mask_forms_agree():
  x = _arange((3, 4, 5))
  want = x[np.newaxis, 1, ..., ::-2]
  args = ([0, 1, 0, 4], [0, 0, 0, 0], [1, 1, 1, -2])
  forms = [
    dict(
      new_axis_mask=[1, 0, 0, 0],
      shrink_axis_mask=[0, 1, 0, 0],
      ellipsis_mask=[0, 0, 1, 0],
      begin_mask=[0, 0, 0, 1],
      end_mask=[0, 0, 0, 1],
    ),
    # shorter masks zero-extended, longer ones truncated
    dict(
      new_axis_mask=[1],
      shrink_axis_mask=(0, 1),
      ellipsis_mask=[0, 0, 1, 0, 1, 1],
      begin_mask=[0, 0, 0, 1, 1],
      end_mask=[0, 0, 0, 1, 0, 1],
    ),
    # TF-style int bitfields (bit i = entry i); bits >= M ignored
    dict(
      new_axis_mask=1,
      shrink_axis_mask=2,
      ellipsis_mask=4 | 16,
      begin_mask=8,
      end_mask=np.int64(8),
    ),
    # NumPy and bool forms
    dict(
      new_axis_mask=np.array([True, False]),
      shrink_axis_mask=[False, True],
      ellipsis_mask=np.array([0, 0, 1]),
      begin_mask=jnp.array([0, 0, 0, 1]),
      end_mask=[0, 0, 0, True],
    ),
  ]
  for masks in forms:
    assert_same(ss(x, *args, **masks), want)
    assert shapes.strided_slice(x.shape, *args, **masks) == want.shape
  for array in (np.array, jnp.array):
    assert_same(ss(x, *map(array, args), **forms[0]), want)


def test_strides_default_to_ones():
  x = _arange((3, 4))
  assert_same(ss(x, [1, -3], [3, -1]), x[1:3, -3:-1])
  assert_same(ss(x, (1, -3), (3, -1), None), x[1:3, -3:-1])


# ---------------------------------------------------------------------------
# Trace-time errors: (data shape, attributes, exception, message regex), data
# of shape (4, 3) and ValueError unless a row says otherwise.


def _rejected(
  begin, end, strides=None, *, match, shape=(4, 3), exc=ValueError, **masks
):
  """A BAD_INPUTS row: data shape, attributes, exception, message regex."""
  attrs = {"begin": begin, "end": end}
  if strides is not None:
    attrs["strides"] = strides
  return shape, attrs | masks, exc, match


BAD_INPUTS = {
  "zero_stride": _rejected(
    [0, 0], [2, 2], [1, 0], match=r"^strides\[1\]=0: a stride must be nonzero"
  ),
  "two_ellipses": _rejected(
    [0, 0],
    [1, 1],
    ellipsis_mask=[1, 1],
    match=r"at most one bit, got bits at positions \[0, 1\]",
  ),
  "two_ellipses_bitfield": _rejected(
    [0, 0, 0], [1, 1, 1], ellipsis_mask=5, match=r"positions \[0, 2\]"
  ),
  "length_mismatch": _rejected(
    [0, 0],
    [1],
    [1, 1],
    match=r"one length M, got len\(begin\)=2, len\(end\)=1, "
    r"len\(strides\)=2",
  ),
  "strides_length": _rejected([0], [1], [1, 1], match=r"len\(strides\)=2"),
  "too_many_dims": _rejected(
    [0, 0, 0],
    [1, 1, 1],
    match=r"names 3 dims of data .* rank 2 \(data shape \(4, 3\)\)",
  ),
  "too_many_dims_with_shrink": _rejected(
    [0, 0, 0],
    [1, 1, 1],
    shape=(4,),
    shrink_axis_mask=[1, 1],
    new_axis_mask=[0, 0, 1],
    match=r"names 2 dims .* rank 1",
  ),
  "shrink_begin_too_big": _rejected(
    [0, 3],
    [0, 0],
    shrink_axis_mask=[0, 1],
    match=r"shrink_axis_mask\[1\] .* begin\[1\]=3, out of "
    r"range for data dim 1 of size 3 \(valid: \[-3, 2\]",
  ),
  "shrink_begin_too_negative": _rejected(
    [-5],
    [0],
    shape=(4,),
    shrink_axis_mask=[1],
    match=r"begin\[0\]=-5, out of range .* size 4",
  ),
  "shrink_empty_dim": _rejected(
    [0], [0], shape=(0, 2), shrink_axis_mask=[1], match=r"of size 0"
  ),
  "float_begin": _rejected(
    [0.5],
    [2],
    shape=(4,),
    exc=TypeError,
    match=r"begin\[0\] must be an int, got float 0.5",
  ),
  "float_array_end": _rejected(
    [0],
    np.array([2.0]),
    shape=(4,),
    exc=TypeError,
    match=r"end must hold integers, got dtype float64",
  ),
  "2d_begin": _rejected(
    np.zeros((1, 1), np.int64),
    [2],
    shape=(4,),
    match=r"begin must be 1-D, got an array of shape \(1, 1\)",
  ),
  "string_strides": _rejected(
    [0],
    [2],
    "1",
    shape=(4,),
    exc=TypeError,
    match=r"strides must be a sequence of ints",
  ),
  "mask_entry_2": _rejected(
    [0, 0], [1, 1], begin_mask=[0, 2], match=r"begin_mask\[1\]=2 must be 0 or 1"
  ),
  "mask_entry_negative": _rejected(
    [0],
    [1],
    shape=(4,),
    end_mask=[-1],
    match=r"end_mask\[0\]=-1 must be 0 or 1",
  ),
  "negative_bitfield": _rejected(
    [0],
    [1],
    shape=(4,),
    new_axis_mask=-1,
    match=r"new_axis_mask=-1 as an int bitfield must be >= 0",
  ),
  "float_mask": _rejected(
    [0],
    [1],
    shape=(4,),
    exc=TypeError,
    shrink_axis_mask=[0.0],
    match=r"shrink_axis_mask\[0\] must be an int",
  ),
}


@pytest.mark.parametrize("name", rejections.BAD_DATA)
def test_bad_data_raises_with_message(name):
  value, exc, pattern = rejections.BAD_DATA[name]
  rejections.assert_rejected_call(
    "StridedSlice-1", exc, pattern, lambda: ss(value, [0], [1], [1])
  )


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_raises_with_message(name):
  shape, attrs, exc, pattern = BAD_INPUTS[name]
  rejections.assert_rejected(
    "StridedSlice-1",
    exc,
    pattern,
    operator=ss,
    shape_rule=shapes.strided_slice,
    arrays=((shape, np.float32),),
    attrs=attrs,
  )


@pytest.mark.parametrize("argnum", [1, 2, 3])
def test_traced_begin_end_strides_say_they_must_be_static(argnum):
  x = np.zeros((4,), np.float32)
  args = [x, np.array([0]), np.array([3]), np.array([1])]

  def f(attr):
    call = list(args)
    call[argnum] = attr
    return ss(*call)

  name = ("begin", "end", "strides")[argnum - 1]
  with pytest.raises(
    TypeError,
    match=rf"StridedSlice-1: {name} must be static "
    r".*got a traced value",
  ):
    jax.jit(f)(args[argnum])


def test_traced_mask_says_it_must_be_static():
  with pytest.raises(TypeError, match=r"begin_mask must be static"):
    jax.jit(lambda m: ss(np.zeros(4), [0], [1], begin_mask=m))(np.array([1]))


def test_shape_rule_rejects_negative_dims():
  with pytest.raises(ValueError, match=r"data shape \(2, -1\) has a negative"):
    shapes.strided_slice((2, -1), [0], [1])


def test_zero_stride_is_ignored_where_the_stride_is():
  x = _arange((3, 4))
  assert_same(
    ss(
      x,
      [0, 1, 0],
      [0, 0, 0],
      [0, 0, 0],
      new_axis_mask=[1],
      shrink_axis_mask=[0, 1],
      ellipsis_mask=[0, 0, 1],
    ),
    x[np.newaxis, 1, ...],
  )


# ---------------------------------------------------------------------------
# dtypes and zero-size inputs.


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_dtypes(dtype):
  x = (np.arange(60).reshape(3, 4, 5) % 7).astype(dtype)
  assert_same(
    ss(
      x,
      [2, 0, -1],
      [0, 0, 0],
      [-1, 1, -2],
      end_mask=[1, 0, 1],
      new_axis_mask=[0, 1],
    ),
    x[2::-1, np.newaxis, -1::-2],
  )


@pytest.mark.parametrize(
  "shape,args,kwargs,index",
  [
    ((0, 3), ([0, 1], [5, 3]), {}, np.s_[0:5, 1:3]),
    ((0, 3), ([0], [5], [-1]), {}, np.s_[::-1]),
    ((4, 0), ([1, 0], [3, 2], [1, -2]), {}, np.s_[1:3, ::-2]),
    ((4, 3), ([3, 0], [1, 2]), {}, np.s_[3:1, 0:2]),
    ((4, 3), ([0, 1], [0, 1]), dict(shrink_axis_mask=[1]), np.s_[0, 1:1]),
    ((2, 0, 3), ([1], [0]), dict(shrink_axis_mask=[1]), np.s_[1]),
  ],
)
def test_zero_size(shape, args, kwargs, index):
  x = np.zeros(shape, np.float64)
  want = x[index]
  assert want.size == 0
  assert_same(ss(x, *args, **kwargs), want)
  grad = jax.grad(lambda x: jnp.sum(ss(x, *args, **kwargs)))(x)
  assert_same(grad, np.zeros(shape))


# ---------------------------------------------------------------------------
# Lowering: slice/rev/reshape forward, pad backward, never gather or scatter.


LOWERING_SPECS = [
  Spec((6, 5, 4), (0, -1, 1), (6, 0, 3), (2, -2, 1)),
  every_mask((6, 5, 4), 2),
  Spec((6, 5, 4), (-1,), (-20,), (-3,)),
]


@pytest.mark.parametrize(
  "spec", LOWERING_SPECS, ids=["strides", "all_masks", "reverse_clamp"]
)
def test_lowers_without_gather_and_transposes_to_pad(spec):
  x = np.ones(spec.data_shape, np.float32)

  def f(x):
    return ss(x, spec.begin, spec.end, **spec.kwargs())

  def loss(x):
    return jnp.sum(jnp.sin(f(x)))

  batched = np.ones((2,) + spec.data_shape, np.float32)
  for fn, arg in (
    (f, x),
    (jax.grad(loss), x),
    (jax.jacfwd(f), x),
    (jax.vmap(f, in_axes=1), np.moveaxis(batched, 0, 1)),
    (jax.vmap(jax.grad(loss)), batched),
  ):
    lowered = jax.jit(fn).lower(arg)
    # Op names only: the test's own name is in the HLO metadata.
    for pattern, text in (
      (r"\b(gather|scatter\w*)\[", str(jax.make_jaxpr(fn)(arg))),
      (r"stablehlo\.\w*(gather|scatter)", lowered.as_text()),
      (r"\b(gather|scatter)\(", lowered.compile().as_text()),
    ):
      assert not re.search(pattern, text), re.search(pattern, text)
  assert re.search(r"\bslice\[", str(jax.make_jaxpr(f)(x)))
  grad_jaxpr = str(jax.make_jaxpr(jax.grad(loss))(x))
  assert re.search(r"\bpad\[", grad_jaxpr)
  assert "dynamic" not in grad_jaxpr


def test_full_spec_is_free():
  x = _arange((3, 4))
  hlo = jax.jit(lambda x: ss(x, [0, 0], [3, 4], [1, 1])).lower(x).as_text()
  for op in ("slice", "reverse", "reshape", "gather"):
    assert f"stablehlo.{op}" not in hlo


# ---------------------------------------------------------------------------
# vmap, jit and derivatives.

TRANSFORM_SPECS = [
  Spec(
    (5, 4, 3),
    (4, -1, 0),
    (0, 0, 3),
    (-2, -1, 1),
    begin_mask=(0, 0, 1),
    end_mask=(0, 1),
  ),
  every_mask((5, 4, 3), -1),
  Spec(
    (5, 4, 3),
    (0, 2),
    (0, 0),
    (0, 0),
    ellipsis_mask=(1,),
    shrink_axis_mask=(0, 1),
  ),
  Spec((5, 4, 3), (-10,), (-20,), (-1,)),
]


TRANSFORM_IDS = [
  "masks_reverse",
  "all_masks",
  "ellipsis_shrink",
  "reverse_clamp",
]


def _call(spec):
  return lambda x: ss(x, spec.begin, spec.end, **spec.kwargs())


@pytest.mark.parametrize("spec", TRANSFORM_SPECS, ids=TRANSFORM_IDS)
@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (1, 0), (-1, 2), (2, -1)])
@pytest.mark.covering_modes
def test_vmap_matches_loop(spec, in_axes, out_axes):
  f = _call(spec)
  batch = np.random.default_rng(0).standard_normal((3,) + spec.data_shape)
  got = jax.vmap(f, in_axes=in_axes, out_axes=out_axes)(
    np.moveaxis(batch, 0, in_axes)
  )
  assert_same(got, np.stack([f(b) for b in batch], axis=out_axes))
  assert_same(
    jax.jit(jax.vmap(jax.vmap(f)))(batch[None]),
    np.stack([f(b) for b in batch])[None],
  )


@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("spec", TRANSFORM_SPECS, ids=TRANSFORM_IDS)
def test_check_grads_order2_fwd_rev(spec):
  x = np.random.default_rng(1).standard_normal(spec.data_shape)
  check_grads(
    jax.jit(_call(spec)),
    (x,),
    order=2,
    modes=["fwd", "rev"],
    atol=1e-7,
    rtol=1e-7,
  )


@pytest.mark.exhaustive(default=2)
@pytest.mark.jax_modes("x64")  # finite differences and float64 sums
@pytest.mark.parametrize("spec", TRANSFORM_SPECS, ids=TRANSFORM_IDS)
def test_grad_and_hessian_mark_the_selected_elements(spec):
  f = _call(spec)
  x = np.arange(np.prod(spec.data_shape), dtype=np.float64).reshape(
    spec.data_shape
  )
  grad = jax.grad(lambda x: jnp.sum(f(x)))(x)
  # Each selected element appears once in the output, so its gradient is 1.
  selected = np.isin(x, np.asarray(f(x)))
  assert_same(grad, selected.astype(np.float64))
  hessian = jax.hessian(lambda x: jnp.sum(jnp.sin(f(x))))(x)
  flat = np.reshape(hessian, (x.size, x.size))
  np.testing.assert_allclose(
    np.diag(flat), np.where(selected, -np.sin(x), 0).ravel(), atol=1e-12
  )
  assert not np.any(flat - np.diag(np.diag(flat)))  # no cross terms


@pytest.mark.parametrize("spec", TRANSFORM_SPECS, ids=TRANSFORM_IDS)
def test_vmap_of_grad_and_jvp(spec):
  f = _call(spec)
  rng = np.random.default_rng(2)
  batch = rng.standard_normal((3,) + spec.data_shape)
  grad = jax.grad(lambda x: jnp.sum(jnp.cos(f(x)) * f(x)))
  got = jax.jit(jax.vmap(grad))(batch)
  for j in range(3):
    tol = 1e-13 if got.dtype == np.float64 else 1e-6  # fused differently
    np.testing.assert_allclose(got[j], grad(batch[j]), rtol=tol, atol=tol)
  tangent = rng.standard_normal(spec.data_shape)
  out, out_dot = jax.jvp(f, (batch[0],), (tangent,))
  assert_same(out, np.asarray(f(batch[0])))
  assert_same(out_dot, np.asarray(f(tangent)))


def test_integer_data_gets_float0_gradient():
  x = _arange((4, 3))
  grad = jax.grad(
    lambda x: jnp.sum(ss(x, [1], [3]).astype(jnp.float32)), allow_int=True
  )(x)
  assert grad.dtype == jax.dtypes.float0 and grad.shape == x.shape
  _, out_dot = jax.jvp(
    lambda x: ss(x, [1], [3]), (x,), (np.zeros(x.shape, jax.dtypes.float0),)
  )
  assert out_dot.dtype == jax.dtypes.float0 and out_dot.shape == (2, 3)


# ---------------------------------------------------------------------------
# Property: equal to NumPy basic indexing for any mix of slices, ints, None
# and one Ellipsis (the runtime agrees with Python everywhere except erratum
# 8, so a negative-stride begin is drawn >= -size).


@st.composite
def _indexing(draw):
  rank = draw(st.integers(0, 4))
  shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
  named = draw(st.integers(0, rank))
  kinds = draw(
    st.permutations(["named"] * named + ["new_axis"] * draw(st.integers(0, 2)))
  )
  has_ellipsis = draw(st.booleans())
  if has_ellipsis:
    kinds.insert(draw(st.integers(0, len(kinds))), "ellipsis")
  split = kinds.index("ellipsis") if has_ellipsis else len(kinds)
  before = kinds[:split].count("named")
  dims = iter(list(range(before)) + list(range(rank - (named - before), rank)))
  index = []
  for kind in kinds:
    if kind == "ellipsis":
      index.append(Ellipsis)
    elif kind == "new_axis":
      index.append(None)
    else:
      size = shape[next(dims)]
      if size > 0 and draw(st.booleans()):
        index.append(draw(st.integers(-size, size - 1)))
        continue
      step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
      low = -size if step is not None and step < 0 else -size - 3
      start = draw(st.none() | st.integers(low, size + 3))
      stop = draw(st.none() | st.integers(-size - 3, size + 3))
      index.append(slice(start, stop, step))
  return shape, tuple(index), draw(st.booleans())


def _to_spec(index, as_bitfields):
  begin, end, strides = [], [], []
  masks = {
    name: []
    for name in (
      "begin_mask",
      "end_mask",
      "new_axis_mask",
      "shrink_axis_mask",
      "ellipsis_mask",
    )
  }
  for entry in index:
    bits = dict.fromkeys(masks, 0)
    b, e, k = 0, 0, 1
    if entry is Ellipsis:
      bits["ellipsis_mask"] = 1
    elif entry is None:
      bits["new_axis_mask"] = 1
    elif isinstance(entry, int):
      b, e, bits["shrink_axis_mask"] = entry, entry + 1, 1
    else:
      k = 1 if entry.step is None else entry.step
      bits["begin_mask"] = int(entry.start is None)
      bits["end_mask"] = int(entry.stop is None)
      b = entry.start or 0
      e = entry.stop or 0
    begin.append(b), end.append(e), strides.append(k)
    for name, bit in bits.items():
      masks[name].append(bit)
  if as_bitfields:
    masks = {
      name: sum(bit << i for i, bit in enumerate(bits))
      for name, bits in masks.items()
    }
  else:  # trailing zeros dropped: the zero-extension does the rest
    masks = {
      name: bits[: max([i + 1 for i, b in enumerate(bits) if b] or [0])]
      for name, bits in masks.items()
    }
  return begin, end, strides, masks


@hypothesis.settings(
  max_examples=100,
  deadline=None,
  derandomize=True,
  suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
@hypothesis.given(_indexing())
def test_matches_numpy_basic_indexing(case):
  shape, index, as_bitfields = case
  x = _arange(shape)
  want = x[index]
  begin, end, strides, masks = _to_spec(index, as_bitfields)
  assert_same(ss(x, begin, end, strides, **masks), want)
  assert shapes.strided_slice(shape, begin, end, strides, **masks) == want.shape


# NumPy arrays have at most 64 dims; JAX's more, and so do the operators'
# inputs.
@pytest.mark.parametrize("rank", [64, 65])
def test_rank_64_and_65(rank):
  data = jnp.arange(2, dtype=jnp.float32).reshape((2,) + (1,) * (rank - 1))
  for call in (ss, jax.jit(ss, static_argnums=(1, 2, 3))):
    out = call(data, (1,), (2,), (1,))
    assert out.shape == (1,) * rank
    assert_same(out.reshape(-1), np.array([1], np.float32))
