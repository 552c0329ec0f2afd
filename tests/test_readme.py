"""The README's first example runs as written and prints the Lorenz spectrum;
the guides' snippets (docs/*.md) run and print what the guides say."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

#: Where this process holds a TPU its children cannot open it.
pytestmark = pytest.mark.not_on_tpu(
    "the README's code runs in a child process, and the chip admits one "
    "process (this one)"
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The guides that left the README, in its former order.
GUIDES = [
    ROOT / "docs" / f"{name}.md" for name in ("networks", "sweeps", "synchronisation")
]


def _blocks(lang, pages=(README,)):
    text = "\n".join(page.read_text() for page in pages)
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _numbers(text):
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text)]


def test_readme_lorenz_example_prints_the_documented_spectrum(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text(_blocks("python")[0])
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    ).stdout
    printed = np.array(_numbers(out))
    assert printed.shape == (3,)
    # Published Lorenz spectrum (0.906, 0, -14.572), to the statistical error
    # of T = 1000.
    np.testing.assert_allclose(printed, [0.906, 0.0, -14.572], atol=3e-2)
    # The output shown in the README is what the example prints (chaos makes the
    # last digits platform dependent, hence the tolerance).
    shown = re.search(r"prints\n\n```\n(.*?)```", README.read_text(), flags=re.S)
    documented = np.array(_numbers(shown.group(1)))
    np.testing.assert_allclose(printed, documented, atol=2e-2)


@pytest.mark.slow
def test_readme_delay_and_sweep_snippets_run(tmp_path):
    blocks = _blocks("python", GUIDES)
    delay = next(b for b in blocks if "dde_problem" in b)
    sweep = next(b for b in blocks if "sweep_lyapunov_spectrum" in b)
    checks = (
        "import numpy as np\n"
        "lam = np.asarray(result.exponents)\n"
        "assert 0 < lam[0] < 0.02 and abs(lam[1]) < 5e-3 and lam[2] < 0, lam\n"
        "assert res.exponents.shape == (1024, 3)\n"
        "print('ok')\n"
    )
    script = tmp_path / "readme_snippets.py"
    script.write_text("\n".join([_blocks("python")[0], delay, sweep, checks]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


def test_readme_synchronisation_snippet_prints_the_documented_interval(tmp_path):
    block = next(
        b for b in _blocks("python", GUIDES) if "master_stability_function" in b
    )
    script = tmp_path / "readme_msf.py"
    script.write_text("import jax\njax.config.update('jax_enable_x64', True)\n" + block)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    low, high = _numbers(out.stdout)
    page = (ROOT / "docs" / "synchronisation.md").read_text()
    shown = re.search(r"prints about `\((.*?)\)`", page).group(1)
    np.testing.assert_allclose([low, high], _numbers(shown), atol=5e-3)
    assert 0 < low < high
