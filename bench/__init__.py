"""Performance benchmark of the jaxops operators (issue 5).

`python -m bench` times each operator at the spec's IR layer shapes, large
shapes and a scaling sweep, against JAX's plain formulations, OpenVINO and
onnxruntime and a memory-traffic floor; see bench/README.md.
"""
