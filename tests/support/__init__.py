"""Test support: NumPy references, case generators, runtime oracles.

Imported one way: `from tests.support import gather as gs`,
`from tests.support import generators as gen`,
`from tests.support.asserts import assert_same`, and so on.

* `asserts`: `assert_same` (shape, dtype, bits, NaN) for every exact check.
* `generators`: seeded values every dtype holds exactly, and the one
  valid-index generator (`random_indices`, unique tuples on request).
* `gather`: GatherND/GatherElements NumPy references and case generators.
* `scatter`: the ScatterNDUpdate NumPy reference and a case generator.
* `strided_slice`: StridedSlice spec examples and random specs.
* `oracles`: the OpenVINO CPU, OpenVINO reference and onnxruntime oracles.
* `processes`: run-once-per-session subprocesses under pytest-xdist.
* `modes`: the x64 switch behind the `jax_mode` fixtures.
* `rejections`: the bad-input driver every operator's table feeds.
"""
