"""Performance benchmark of the jaxops operators.

`python -m bench` times each operator at the spec's IR layer shapes, large
shapes, a scaling sweep and under `jax.vmap`, against JAX's plain
formulations, OpenVINO, onnxruntime, PyTorch and a memory-traffic floor, and
checks each operator's performance bars; see bench/README.md.
"""
