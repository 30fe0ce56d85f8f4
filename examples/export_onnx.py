"""Train in JAX, deploy to ONNX Runtime and OpenVINO: a round trip.

A small masked-token model uses GatherND, GatherElements, ScatterNDUpdate
and StridedSlice as a converted OpenVINO/ONNX graph would (see
examples/train_infill.py for the full story):
GatherND looks up token embeddings and picks per-example features,
ScatterNDUpdate writes a learned MASK embedding at the hidden position,
StridedSlice crops the left/centre/right context windows, and GatherElements
picks the log-probability of a queried symbol. After a few training steps in
JAX, the inference function (weights closed over, so they become
initializers) is exported twice -- with plain jax2onnx and with
`jaxops.onnx.to_onnx`, where each operator call is one ONNX node -- and run in
onnxruntime and OpenVINO (`openvino.convert_model`, compiled on CPU). The
script prints the node counts (or that plain jax2onnx cannot export the
model) and checks that JAX and both runtimes agree.

Needs the optional extra: pip install 'jaxops[onnx]' (plus onnxruntime and
openvino to run the model).

Run: python examples/export_onnx.py [--steps N] [--seed S]
"""

import argparse
import collections
import functools
import pathlib
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxops
import jaxops.onnx

VOCAB, SEQ_LEN, EMBED, HIDDEN, BATCH = 12, 10, 16, 16, 128
# Every index below is in range by construction (token ids < VOCAB, interior
# positions, queried symbols < VOCAB): promise it. That also lets plain
# jax2onnx export the model for the node count (it has no lowering for the
# out-of-range check of the default fill/drop modes); jaxops.onnx exports
# the same nodes in every mode but "clip".
MODE = "promise_in_bounds"


def make_batch(rng, transition, n):
  """Markov-chain sequences [n, SEQ_LEN], a hidden interior position each,
  and a queried symbol each."""
  tokens = np.empty((n, SEQ_LEN), np.int32)
  tokens[:, 0] = rng.integers(0, VOCAB, n)
  cumulative = transition.cumsum(axis=1)
  for t in range(1, SEQ_LEN):
    u = rng.random((n, 1))
    tokens[:, t] = np.minimum(
      (u > cumulative[tokens[:, t - 1]]).sum(1), VOCAB - 1
    )
  hidden = rng.integers(1, SEQ_LEN - 1, n).astype(np.int32)
  query = rng.integers(0, VOCAB, n).astype(np.int32)
  return tokens, hidden, query


def init_params(key):
  keys = jax.random.split(key, 5)
  return {
    "embed": 0.1 * jax.random.normal(keys[0], (VOCAB, EMBED)),
    "mask": 0.1 * jax.random.normal(keys[1], (EMBED,)),
    "window": 0.1 * jax.random.normal(keys[2], (3, EMBED, HIDDEN)),
    "out": 0.1 * jax.random.normal(keys[3], (HIDDEN, VOCAB)),
    "bias": jnp.zeros((VOCAB,)),
  }


def crop(x, start, stop):
  """x[:, start:stop] as StridedSlice-1 (stop=0 means 'to the end')."""
  return jaxops.strided_slice(
    x, [0, start], [0, stop], begin_mask=[1, 0], end_mask=[1, int(stop == 0)]
  )


def log_probs(params, tokens, hidden):
  """Log-probabilities [B, VOCAB] of the symbol at each hidden position."""
  batch = tokens.shape[0]
  emb = jaxops.gather_nd(params["embed"], tokens[..., None], mode=MODE)
  where = jnp.stack([jnp.arange(batch, dtype=hidden.dtype), hidden], axis=1)
  mask_rows = jnp.broadcast_to(params["mask"], (batch, EMBED))
  emb = jaxops.scatter_nd_update(
    emb, where, mask_rows, unique_indices=True, mode=MODE
  )
  features = jax.nn.relu(
    crop(emb, 0, -2) @ params["window"][0]
    + crop(emb, 1, -1) @ params["window"][1]
    + crop(emb, 2, 0) @ params["window"][2]
  )
  picked = jaxops.gather_nd(
    features, (hidden - 1)[:, None], batch_dims=1, mode=MODE
  )
  return jax.nn.log_softmax(picked @ params["out"] + params["bias"])


def infer(params, tokens, hidden, query):
  """The deployed function: log P(query), and the most likely symbol."""
  scores = log_probs(params, tokens, hidden)
  return (
    jaxops.gather_elements(scores, query[:, None], axis=1, mode=MODE)[:, 0],
    jnp.argmax(scores, axis=1).astype(jnp.int32),
  )


def loss_fn(params, tokens, hidden):
  scores = log_probs(params, tokens, hidden)
  target = jaxops.gather_nd(tokens, hidden[:, None], batch_dims=1)
  return -jnp.mean(jaxops.gather_elements(scores, target[:, None], axis=1))


@jax.jit
def train_step(params, moments, step, tokens, hidden):
  """One Adam step (learning rate 0.02, b1=0.9, b2=0.999)."""
  loss, grads = jax.value_and_grad(loss_fn)(params, tokens, hidden)
  first = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, moments[0], grads)
  second = jax.tree.map(
    lambda v, g: 0.999 * v + 0.001 * g * g, moments[1], grads
  )
  t = step + 1
  scale = 0.02 * jnp.sqrt(1 - 0.999**t) / (1 - 0.9**t)
  params = jax.tree.map(
    lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-8), params, first, second
  )
  return params, (first, second), loss


def summary(model):
  counts = collections.Counter(node.op_type for node in model.graph.node)
  shown = ", ".join(
    f"{op} {n}"
    for op, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
  )
  return f"{sum(counts.values())} nodes ({shown})"


def run_onnxruntime(model, inputs):
  import onnxruntime as ort

  session = ort.InferenceSession(
    model.SerializeToString(), providers=["CPUExecutionProvider"]
  )
  names = [i.name for i in session.get_inputs()]
  return session.run(None, dict(zip(names, inputs)))


def run_openvino(model, inputs):
  import openvino as ov

  with tempfile.TemporaryDirectory() as folder:
    path = pathlib.Path(folder) / "model.onnx"
    path.write_bytes(model.SerializeToString())
    ov_model = ov.convert_model(str(path))
  compiled = ov.Core().compile_model(
    ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
  )
  results = compiled(inputs)
  return [
    np.asarray(results[compiled.output(j)])
    for j in range(len(compiled.outputs))
  ]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=150)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  rng = np.random.default_rng(args.seed)
  transition = rng.dirichlet(np.full(VOCAB, 0.1), size=VOCAB)
  test = make_batch(rng, transition, 512)
  params = init_params(jax.random.key(args.seed))
  moments = (jax.tree.map(jnp.zeros_like, params),) * 2
  start = time.perf_counter()
  initial = float(loss_fn(params, *test[:2]))
  for step in range(args.steps):
    tokens, hidden, _ = make_batch(rng, transition, BATCH)
    params, moments, _ = train_step(params, moments, step, tokens, hidden)
  final = float(loss_fn(params, *test[:2]))
  print(
    f"trained {args.steps} steps in {time.perf_counter() - start:.1f} s:"
    f" held-out loss {initial:.4f} -> {final:.4f}"
  )

  deployed = functools.partial(infer, jax.device_get(params))
  want = [np.asarray(x) for x in jax.jit(deployed)(*test)]
  model = jaxops.onnx.to_onnx(deployed, *test)
  import jax2onnx

  try:
    plain = summary(jax2onnx.to_onnx(deployed, list(test)))
  except NotImplementedError as e:
    # The gathers' XLA lowerings batch their indices with a primitive of
    # their own, which plain jax2onnx has no lowering for (docs/export.md).
    plain = f"cannot export ({str(e).splitlines()[0]})"
  # Plain jax2onnx traces under its patches of jax.numpy and leaves those
  # traces in JAX's jit caches (jaxops.onnx keeps its own apart): drop them.
  jax.clear_caches()
  print(f"plain jax2onnx: {plain}")
  print(f"jaxops.onnx:    {summary(model)}")

  for name, run in (
    ("onnxruntime", run_onnxruntime),
    ("OpenVINO", run_openvino),
  ):
    got = run(model, list(test))
    gap = float(np.max(np.abs(got[0] - want[0])))
    same = bool(np.array_equal(got[1], want[1]))
    print(
      f"{name:12s} max |log P difference| {gap:.2e}, predictions "
      f"{'equal' if same else 'DIFFER'}"
    )
    assert gap < 1e-4 and same, name
  print(
    "RESULT JAX, onnxruntime and OpenVINO agree on "
    f"{len(test[0])} held-out sequences"
  )


if __name__ == "__main__":
  main()
