"""Masked-token infilling: a small model trained with GatherND, GatherElements,
ScatterNDUpdate and StridedSlice.

The data are sequences from a random Markov chain over VOCAB symbols, observed
at every second step (so the observed chain moves with the squared transition
matrix). In every training sequence one interior position, drawn per example,
is hidden, and the model predicts the hidden symbol from its neighbours -- the
masked-language-model objective in miniature. Each operator does the job it
does in a converted OpenVINO/ONNX graph of such a model:

* StridedSlice subsamples the raw chain (`raw[:, ::2]`) and crops the
  embedded sequence into its left / centre / right context windows
  (`emb[:, :-2]`, `emb[:, 1:-1]`, `emb[:, 2:]`).
* GatherND with batch_dims=0 looks up the embedding of every token; with
  batch_dims=1 it picks, per example, the target symbol and the feature vector
  at that example's hidden position.
* ScatterNDUpdate writes a learned MASK embedding into each sequence at its
  hidden position, so the model cannot see the answer.
* GatherElements picks the log-probability of the true symbol in the loss.

Training uses plain JAX (jit, value_and_grad and a hand-written Adam). The
model, a sum of three role-specific linear maps of the context embeddings, can
express the exact posterior P(x_p | x_{p-1}, x_{p+1}) ~ T2[x_{p-1}, x_p] *
T2[x_p, x_{p+1}], so its held-out loss should approach the Bayes-optimal loss,
which the script computes from the true chain and prints as the reference.

Run: python examples/train_infill.py [--steps N] [--seed S]   (~15 s on a CPU)
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxops

VOCAB = 14  # symbols of the chain
SEQ_LEN = 16  # observed symbols per sequence
EMBED, HIDDEN = 32, 32
BATCH = 256
PEAK_LEARNING_RATE = 0.02
HELD_OUT_SIZE = 4096


def chain_transition(rng):
  """A random, fairly peaked transition matrix (rows sum to 1)."""
  return rng.dirichlet(np.full(VOCAB, 0.08), size=VOCAB)


def sample_raw_chain(rng, transition, n, length):
  """n sequences of the chain at full time resolution, shape [n, length]."""
  tokens = np.empty((n, length), dtype=np.int32)
  tokens[:, 0] = rng.integers(0, VOCAB, n)
  cumulative = transition.cumsum(axis=1)
  for t in range(1, length):
    u = rng.random((n, 1))
    tokens[:, t] = (u > cumulative[tokens[:, t - 1]]).sum(axis=1)
  return np.minimum(tokens, VOCAB - 1)


def subsample(raw):
  """raw[:, ::2] as StridedSlice-1: every second step of every sequence."""
  return jaxops.strided_slice(
    raw,
    begin=[0, 0],
    end=[0, 0],
    strides=[1, 2],
    begin_mask=[1, 1],
    end_mask=[1, 1],
  )


def make_dataset(rng, transition, n):
  """Observed sequences [n, SEQ_LEN] and one hidden interior position each."""
  raw = sample_raw_chain(rng, transition, n, 2 * SEQ_LEN)
  tokens = subsample(jnp.asarray(raw))
  hidden = rng.integers(1, SEQ_LEN - 1, n).astype(np.int32)
  return tokens, jnp.asarray(hidden)


def bayes_loss(transition, tokens, hidden):
  """Mean -log P(x_p | x_{p-1}, x_{p+1}) under the true (subsampled) chain."""
  step2 = transition @ transition  # the observed chain moves by T^2
  tokens, hidden = np.asarray(tokens), np.asarray(hidden)
  rows = np.arange(len(tokens))
  left, target, right = (tokens[rows, hidden + d] for d in (-1, 0, 1))
  joint = step2[left] * step2[:, right].T  # [n, VOCAB] unnormalised posterior
  posterior = joint / joint.sum(axis=1, keepdims=True)
  return float(-np.mean(np.log(posterior[rows, target])))


def init_params(key):
  keys = jax.random.split(key, 6)
  scale = 0.1
  return {
    "embed": scale * jax.random.normal(keys[0], (VOCAB, EMBED)),
    "mask": scale * jax.random.normal(keys[1], (EMBED,)),
    "left": scale * jax.random.normal(keys[2], (EMBED, HIDDEN)),
    "centre": scale * jax.random.normal(keys[3], (EMBED, HIDDEN)),
    "right": scale * jax.random.normal(keys[4], (EMBED, HIDDEN)),
    "out": scale * jax.random.normal(keys[5], (HIDDEN, VOCAB)),
    "bias": jnp.zeros((VOCAB,)),
  }


def crop(x, start, stop):
  """x[:, start:stop, :] as StridedSlice-1 (stop=0 means 'to the end')."""
  return jaxops.strided_slice(
    x,
    begin=[0, start, 0],
    end=[0, stop, 0],
    begin_mask=[1, 0, 1],
    end_mask=[1, int(stop == 0), 1],
  )


def loss_fn(params, tokens, hidden):
  """Mean negative log-likelihood of the hidden symbols; tokens [B, L]."""
  batch = tokens.shape[0]
  emb = jaxops.gather_nd(params["embed"], tokens[..., None])  # [B, L, E]
  # Hide the answer: overwrite each sequence's hidden position with MASK.
  where = jnp.stack([jnp.arange(batch, dtype=hidden.dtype), hidden], axis=1)
  mask_rows = jnp.broadcast_to(params["mask"], (batch, EMBED))
  emb = jaxops.scatter_nd_update(emb, where, mask_rows, unique_indices=True)
  # Features of every interior position from its 3-token window.
  features = (
    crop(emb, 0, -2) @ params["left"]
    + crop(emb, 1, -1) @ params["centre"]
    + crop(emb, 2, 0) @ params["right"]
  )  # [B, L-2, H]
  # Per example, the features at its hidden position (interior index p - 1).
  picked = jaxops.gather_nd(features, (hidden - 1)[:, None], batch_dims=1)
  log_probs = jax.nn.log_softmax(picked @ params["out"] + params["bias"])
  target = jaxops.gather_nd(tokens, hidden[:, None], batch_dims=1)  # [B]
  target_log_probs = jaxops.gather_elements(log_probs, target[:, None], axis=1)
  return -jnp.mean(target_log_probs)


@jax.jit
def train_step(params, moments, step, learning_rate, tokens, hidden):
  """One Adam step (b1=0.9, b2=0.999) on a minibatch."""
  loss, grads = jax.value_and_grad(loss_fn)(params, tokens, hidden)
  first, second = moments
  first = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, first, grads)
  second = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, second, grads)
  t = step + 1
  correction = jnp.sqrt(1 - 0.999**t) / (1 - 0.9**t)
  params = jax.tree.map(
    lambda p, m, v: p - learning_rate * correction * m / (jnp.sqrt(v) + 1e-8),
    params,
    first,
    second,
  )
  return params, (first, second), loss


eval_loss = jax.jit(loss_fn)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  rng = np.random.default_rng(args.seed)
  transition = chain_transition(rng)
  test_tokens, test_hidden = make_dataset(rng, transition, HELD_OUT_SIZE)
  reference = bayes_loss(transition, test_tokens, test_hidden)

  params = init_params(jax.random.key(args.seed))
  moments = (jax.tree.map(jnp.zeros_like, params),) * 2
  initial = float(eval_loss(params, test_tokens, test_hidden))
  print(
    f"held-out loss at start {initial:.4f}  (uniform guess log V = "
    f"{np.log(VOCAB):.4f}, Bayes-optimal {reference:.4f})"
  )

  start = time.perf_counter()
  # Report on a doubling schedule (the loss falls fastest early) and at the end.
  report_at = {1} | {25 * 2**i for i in range(20)} | {args.steps}
  for step in range(args.steps):
    # Fresh sequences every step (no over-fitting to a finite training set)
    # and a learning rate decaying linearly to 0 (Adam's noise floor shrinks).
    tokens, hidden = make_dataset(rng, transition, BATCH)
    learning_rate = PEAK_LEARNING_RATE * (1 - step / args.steps)
    params, moments, loss = train_step(
      params, moments, step, learning_rate, tokens, hidden
    )
    if step + 1 in report_at:
      held_out = float(eval_loss(params, test_tokens, test_hidden))
      print(
        f"step {step + 1:5d}  train loss {float(loss):.4f}  "
        f"held-out loss {held_out:.4f}"
      )
  final = float(eval_loss(params, test_tokens, test_hidden))
  print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f} s")
  print(
    f"RESULT held-out loss {initial:.4f} -> {final:.4f}, Bayes-optimal "
    f"{reference:.4f} (gap {final - reference:.4f})"
  )


if __name__ == "__main__":
  main()
