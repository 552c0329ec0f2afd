"""``pytest --help`` lists the plugin's options (argparse formats help with %)."""

import subprocess
import sys

from support.deadlines import timeout_s


def test_pytest_help_shows_the_plugin_options(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout_s(120),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = " ".join(proc.stdout.split())  # help lines are wrapped
    assert "--jax-compare-fail=EXPR" in text
    assert "FIELD:PERCENT% or FIELD:TIME with a unit" in text
    assert "--jax-compare-across-machines" in text
