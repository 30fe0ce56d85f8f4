"""Entry point: `python -m bench --help`."""

import sys

from bench.cli import main

sys.exit(main())
