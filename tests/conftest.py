"""Test-wide JAX configuration.

64-bit mode is on for the whole suite so that int64 indices and float64 data
(used by the gradient checks) are what they say they are. Doctests write their
dtypes explicitly so that they hold in both modes.
"""

import jax

jax.config.update("jax_enable_x64", True)
