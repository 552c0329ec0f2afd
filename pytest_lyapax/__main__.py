"""``python -m pytest_lyapax``: the report tools (see :mod:`pytest_lyapax.cli`)."""

import sys

from .cli import main

sys.exit(main())
