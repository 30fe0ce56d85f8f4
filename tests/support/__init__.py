"""Test support: NumPy references, case generators, runtime oracles.

Imported one way: `from tests.support import gather as gs`,
`from tests.support.asserts import assert_same`, and so on.

* `asserts`: `assert_same` (shape, dtype, bits, NaN) for every exact check.
* `gather`: GatherND/GatherElements NumPy references and case generators.
* `strided_slice`: StridedSlice spec examples and random specs.
* `oracles`: the OpenVINO CPU, OpenVINO reference and onnxruntime oracles.
* `processes`: run-once-per-session subprocesses under pytest-xdist.
"""
