"""Porting an OpenVINO model fragment: an embedding lookup, a reversed
context and a per-example pick, as Gather-8 and Slice-8.

The "original" is an OpenVINO graph built with `openvino.opset8` (what a
converted model holds): token ids -> Gather(table, axis 0) -> the embedded
sequence plus its reverse (Slice with step -1 and stop INT64_MIN, "to the
front") -> at each example's position a Gather with batch_dims=1. Its
tokenizer pads with the id VOCAB, one past the table: Gather-8 reads zeros
there, which the model relies on.

The port with `jaxops.gather` / `jaxops.slice` is bit-identical to the
OpenVINO CPU plugin, padding included. The hand port most people write
(`jnp.take`, `x[:, ::-1]`, `take_along_axis`) is not: `jnp.take` returns NaN
for the padding id and the NaN spreads through the reversed sum. Then the
port is fine-tuned with plain `jax.value_and_grad` (the gradients of both
operators), fitting a fresh table to the original's outputs.

Run: python examples/ported_lookup.py [--steps N]   (a few seconds on a CPU)
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxops

VOCAB, EMBED, BATCH, LENGTH = 50, 16, 64, 12
INT64_MIN = -(2**63)


def make_inputs(rng):
  """Token ids with padding (id VOCAB) after each sequence's length, and a
  position inside each sequence."""
  lengths = rng.integers(4, LENGTH + 1, BATCH)
  tokens = rng.integers(0, VOCAB, (BATCH, LENGTH)).astype(np.int32)
  tokens[np.arange(LENGTH)[None, :] >= lengths[:, None]] = VOCAB
  positions = rng.integers(0, lengths).astype(np.int32)
  return tokens, positions


def openvino_original(table):
  """The fragment as the converted model has it, compiled on OpenVINO's CPU."""
  import openvino as ov
  import openvino.opset8 as ops

  tokens = ops.parameter([BATCH, LENGTH], np.int32)
  positions = ops.parameter([BATCH], np.int32)

  def const(values):
    return ops.constant(np.asarray(values, np.int64))

  emb = ops.gather(ops.constant(table), tokens, const(0))
  reverse = ops.slice(
    emb, const([-1]), const([INT64_MIN]), const([-1]), const([1])
  )
  feats = ops.add(emb, reverse)
  picked = ops.gather(feats, positions, const(1), 1)
  model = ov.Model([picked], [tokens, positions])
  compiled = ov.Core().compile_model(
    model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
  )
  return lambda t, p: np.asarray(compiled([t, p])[0])


def ported(table, tokens, positions):
  """The same fragment with jaxops: Gather-8 and Slice-8 semantics."""
  emb = jaxops.gather(table, tokens)  # padding ids read zeros
  reverse = jaxops.slice(emb, [-1], [INT64_MIN], [-1], axes=[1])
  return jaxops.gather(emb + reverse, positions, axis=1, batch_dims=1)


def hand_ported(table, tokens, positions):
  """What a hand port usually looks like."""
  emb = jnp.take(table, tokens, axis=0)  # out of range: NaN
  feats = emb + emb[:, ::-1]
  return jnp.take_along_axis(feats, positions[:, None, None], axis=1)[:, 0]


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  rng = np.random.default_rng(args.seed)
  # Halves of small integers: every sum here is exact in float32.
  table = (rng.integers(-8, 9, (VOCAB, EMBED)) / 2).astype(np.float32)
  tokens, positions = make_inputs(rng)

  original = openvino_original(table)
  want = original(tokens, positions)
  got = np.asarray(jax.jit(ported)(table, tokens, positions))
  print(f"padding ids: {int((tokens == VOCAB).sum())} of {tokens.size}")
  same = got.shape == want.shape and np.array_equal(got, want)
  print(f"jaxops port equals OpenVINO bit for bit: {same}")
  naive = np.asarray(jax.jit(hand_ported)(table, tokens, positions))
  bad = int((~np.isclose(naive, want) | np.isnan(naive)).any(axis=1).sum())
  print(f"hand port (jnp.take) differs on {bad} of {BATCH} examples")

  # Fine-tune a fresh table to reproduce the original's outputs.
  @jax.jit
  def step(params, tokens, positions, target):
    def loss(params):
      return jnp.mean((ported(params, tokens, positions) - target) ** 2)

    value, grad = jax.value_and_grad(loss)(params)
    return params - 0.5 * grad, value

  params = jnp.zeros_like(table)
  first = None
  for _ in range(args.steps):
    batch_tokens, batch_positions = make_inputs(rng)
    target = original(batch_tokens, batch_positions)
    params, value = step(params, batch_tokens, batch_positions, target)
    first = float(value) if first is None else first
  print(f"fine-tuning loss {first:.4f} -> {float(value):.4f}")
  if same and bad > 0:
    print("RESULT the jaxops port matches OpenVINO; the hand port does not")


if __name__ == "__main__":
  main()
