"""Quickstart: jaxops' gather operators inside a jitted, vmapped training step.

A bigram language model learns the transition table of a random Markov chain.
Per example, `gather_nd` looks up the logits row of each previous token and
`gather_elements` picks the log-probability of each next token -- the two
lookups an OpenVINO/ONNX graph of such a model would contain. The per-example
loss is vmapped over the batch and differentiated with jax.grad inside
jax.jit. The script prints a falling loss, then checks the jaxops gradient
against plain jnp indexing and against finite differences.

Run: python examples/quickstart.py   (a few seconds on a CPU)
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

import jaxops

VOCAB, SEQ_LEN, BATCH, STEPS, LEARNING_RATE = 16, 32, 64, 300, 2.0


def sample_sequences(rng, transition, n):
  """Draws n token sequences from the Markov chain `transition`."""
  tokens = np.empty((n, SEQ_LEN + 1), dtype=np.int32)
  tokens[:, 0] = rng.integers(0, VOCAB, n)
  for t in range(SEQ_LEN):
    cumulative = transition[tokens[:, t]].cumsum(axis=1)
    tokens[:, t + 1] = (rng.random((n, 1)) > cumulative).sum(axis=1)
  return np.minimum(tokens, VOCAB - 1)


def example_loss(table, tokens):
  """Mean negative log-likelihood of one sequence: tokens has shape [T + 1]."""
  previous, following = tokens[:-1], tokens[1:]
  logits = jaxops.gather_nd(table, previous[:, None])  # [T, V]
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  picked = jaxops.gather_elements(log_probs, following[:, None], axis=1)
  return -jnp.mean(picked)


def batch_loss(table, tokens):
  return jnp.mean(jax.vmap(example_loss, in_axes=(None, 0))(table, tokens))


def plain_batch_loss(table, tokens):
  """The same model with plain jnp indexing, as a reference."""
  logits = table[tokens[:, :-1]]
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  picked = jnp.take_along_axis(log_probs, tokens[:, 1:, None], axis=-1)
  return -jnp.mean(picked)


@jax.jit
def train_step(table, tokens):
  loss, grad = jax.value_and_grad(batch_loss)(table, tokens)
  return table - LEARNING_RATE * grad, loss


def main():
  rng = np.random.default_rng(0)
  transition = rng.dirichlet(np.full(VOCAB, 0.3), size=VOCAB)
  entropy = -np.mean(np.sum(transition * np.log(transition + 1e-30), axis=1))
  table = jnp.zeros((VOCAB, VOCAB), jnp.float32)

  start = time.perf_counter()
  for step in range(STEPS + 1):
    tokens = jnp.asarray(sample_sequences(rng, transition, BATCH))
    table, loss = train_step(table, tokens)
    if step % 50 == 0:
      print(f"step {step:4d}  loss {float(loss):.4f}")
  print(
    f"trained in {time.perf_counter() - start:.1f} s; loss started at "
    f"log(V) = {np.log(VOCAB):.4f}, the chain's entropy is ~{entropy:.4f}"
  )

  tokens = jnp.asarray(sample_sequences(rng, transition, 8))
  ours = jax.jit(jax.grad(batch_loss))(table, tokens)
  plain = jax.jit(jax.grad(plain_batch_loss))(table, tokens)
  max_diff = float(jnp.max(jnp.abs(ours - plain)))
  print(
    f"gradient check vs plain jnp indexing: max |difference| = {max_diff:.2e}"
  )
  assert max_diff < 1e-5, max_diff
  with jax.enable_x64(True):
    # Jitted: each derivative check compiles once instead of op by op.
    check_grads(
      jax.jit(lambda t: batch_loss(t, tokens)),
      (table.astype(jnp.float64),),
      order=2,
      modes=["fwd", "rev"],
    )
  print("check_grads (float64, order 2, forward and reverse mode): passed")


if __name__ == "__main__":
  main()
