"""``python -m pytest_lyapax``: the report tools (see :mod:`pytest_lyapax.cli`)."""

import sys

from pytest_lyapax.cli import main

sys.exit(main())
