"""Message passing over a random graph, trained with the scatter reductions.

A teacher graph network labels the nodes of a random directed graph; a student
of the same shape, started elsewhere, learns the labels. One layer, per node
i with in-neighbours N(i):

    m_j   = tanh(x_j W)          (a message per edge j -> i)
    sum_i = sum_{j in N(i)} m_j  ScatterNDUpdate-15, reduction="sum"
    mean_i, max_i over N(i)      ScatterElementsUpdate-12, reduction="mean"
                                 and "max", use_init_val=False
    y_i   = x_i a + sum_i b + mean_i c + max_i d

A node without in-edges keeps 0 in every aggregate: the data the reductions
start from, which `use_init_val=False` leaves alone where nothing arrives.
The gradients flow through all three reductions to W (the mean's is linear
given the counts, the max's goes to the edge that produced the maximum).
The labels carry Gaussian noise of variance NOISE**2, so the student's loss
should fall from the untrained value to about that noise floor, never far
below it.

The reductions are deterministic: the script runs the jitted forward pass
twice and checks the bits agree, and checks the jaxops sum against plain
`.at[].add` (equal here: the messages are rounded to multiples of 2**-10, so
every order of summation gives the same float).

Run: python examples/message_passing.py [--steps N] [--seed S]   (a few seconds)
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxops

NODES, EDGES, FEATURES, HIDDEN = 256, 2048, 8, 8
NOISE = 0.05
LEARNING_RATE = 0.03


def make_graph(rng):
  """Random edges (src -> dst) and node features."""
  src = rng.integers(0, NODES, EDGES)
  dst = rng.integers(0, NODES, EDGES)
  x = rng.standard_normal((NODES, FEATURES)).astype(np.float32)
  return jnp.asarray(src), jnp.asarray(dst), jnp.asarray(x)


def init_params(key, scale=1.0):
  keys = jax.random.split(key, 5)
  shapes = {
    "w": (FEATURES, HIDDEN),
    "a": (FEATURES,),
    "b": (HIDDEN,),
    "c": (HIDDEN,),
    "d": (HIDDEN,),
  }
  return {
    name: scale * jax.random.normal(k, shape) / np.sqrt(shape[0])
    for k, (name, shape) in zip(keys, shapes.items())
  }


def aggregates(w, src, dst, x):
  """Sum, mean and max of the messages arriving at each node."""
  messages = jnp.tanh(x[src] @ w)  # (EDGES, HIDDEN)
  # Multiples of 2**-10, exact in float32: every order of summation gives
  # the same bits (the rounding's gradient passes straight through).
  messages += jax.lax.stop_gradient(
    jnp.round(messages * 1024) / 1024 - messages
  )
  zeros = jnp.zeros((NODES, HIDDEN), messages.dtype)
  total = jaxops.scatter_nd_update(
    zeros, dst[:, None], messages, reduction="sum"
  )
  per_element = jnp.broadcast_to(dst[:, None], messages.shape)
  mean, largest = (
    jaxops.scatter_elements_update(
      zeros, per_element, messages, 0, reduction=r, use_init_val=False
    )
    for r in ("mean", "max")
  )
  return total, mean, largest, messages


def predict(params, src, dst, x):
  total, mean, largest, _ = aggregates(params["w"], src, dst, x)
  return (
    x @ params["a"]
    + total @ params["b"]
    + mean @ params["c"]
    + largest @ params["d"]
  )


def loss_fn(params, src, dst, x, y):
  return jnp.mean((predict(params, src, dst, x) - y) ** 2)


@jax.jit
def train_step(params, moments, step, src, dst, x, y):
  """One Adam step."""
  loss, grads = jax.value_and_grad(loss_fn)(params, src, dst, x, y)
  first, second = moments
  first = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, first, grads)
  second = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, second, grads)
  t = step + 1
  params = jax.tree.map(
    lambda p, m, v: (
      p
      - LEARNING_RATE
      * (m / (1 - 0.9**t))
      / (jnp.sqrt(v / (1 - 0.999**t)) + 1e-8)
    ),
    params,
    first,
    second,
  )
  return params, (first, second), loss


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  rng = np.random.default_rng(args.seed)
  key = jax.random.key(args.seed)
  teacher_key, student_key = jax.random.split(key)

  src, dst, x = make_graph(rng)
  teacher = init_params(teacher_key)
  y = predict(teacher, src, dst, x)
  y = y + NOISE * jnp.asarray(rng.standard_normal(NODES), jnp.float32)

  forward = jax.jit(aggregates)
  first, second = (
    forward(teacher["w"], src, dst, x),
    forward(teacher["w"], src, dst, x),
  )
  same = all(
    np.array_equal(np.asarray(u).view(np.uint32), np.asarray(v).view(np.uint32))
    for u, v in zip(first, second)
  )
  plain = jnp.zeros((NODES, HIDDEN)).at[dst].add(first[3])
  print(
    f"graph: {NODES} nodes, {EDGES} edges; reductions deterministic "
    f"(two runs bit-equal): {same}; jaxops sum == plain .at[].add: "
    f"{bool(jnp.array_equal(first[0], plain))}"
  )

  params = init_params(student_key)
  moments = (
    jax.tree.map(jnp.zeros_like, params),
    jax.tree.map(jnp.zeros_like, params),
  )
  initial = float(loss_fn(params, src, dst, x, y))
  start = time.perf_counter()
  for step in range(args.steps):
    params, moments, loss = train_step(params, moments, step, src, dst, x, y)
    if (step + 1) % max(1, args.steps // 4) == 0:
      print(f"step {step + 1:5d}  loss {float(loss):.5f}")
  final = float(loss_fn(params, src, dst, x, y))
  print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f} s")
  print(f"RESULT loss {initial:.5f} -> {final:.5f}, noise floor {NOISE**2:.5f}")


if __name__ == "__main__":
  main()
