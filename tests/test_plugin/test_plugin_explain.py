"""The cost model, summary.md and report.html.

Timings here are synthetic, drawn in the test from a known ``a + b*n^p`` with
seeded log-normal noise, so the fit can be checked against the truth; no
shipped file holds them.  The browser test renders report.html in Debian's
``chromium`` (headless, every host name unresolvable) and skips when it is
not installed.
"""

import html.parser
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.deadlines import timeout_s

from pytest_lyapax.report import costmodel
from pytest_lyapax.report.schema import SCHEMA_VERSION, check_report
from pytest_lyapax.report.series import Point, group_sized
from pytest_lyapax.views import render
from pytest_lyapax.views.document import view_of

SIZES = (10, 20, 50, 100, 200, 500, 1000)
TRUTH = {"cpu": (2e-5, 2e-8, 2.0), "gpu": (4e-4, 1e-9, 2.0)}
# Where a_cpu + b_cpu n^2 = a_gpu + b_gpu n^2.
CROSSING = math.sqrt((4e-4 - 2e-5) / (2e-8 - 1e-9))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "_static"


def samples(a, b, p, n, rng, rounds=20, noise=0.03):
    """Per-call round times around the model, with 3% log-normal noise."""
    return (a + b * n**p) * np.exp(rng.normal(0, noise, rounds))


def point(n, times):
    q1, med, q3 = (float(x) for x in np.quantile(times, [0.25, 0.5, 0.75]))
    return Point(n, med, q1, q3, tuple(float(x) for x in times))


def series(label, seed=0, sizes=SIZES):
    rng = np.random.default_rng(seed)
    a, b, p = TRUTH[label]
    return [point(n, samples(a, b, p, n, rng)) for n in sizes]


def test_fit_recovers_fixed_cost_and_exponent():
    for label, (a, _, p) in TRUTH.items():
        fit = costmodel.fit_series(label, series(label, seed=3), "bench")
        assert fit.status == costmodel.FIT, fit.describe()
        assert fit.a == pytest.approx(a, rel=0.05)
        assert fit.p == pytest.approx(p, abs=0.1)
        lo, hi = fit.a_interval
        assert lo <= a <= hi
        assert fit.p_interval[0] <= p <= fit.p_interval[1]
        assert fit.describe().startswith(f"{label}: fixed ")


def test_predicted_crossover_and_its_interval():
    cpu = costmodel.fit_series("cpu", series("cpu", 1), "bench")
    gpu = costmodel.fit_series("gpu", series("gpu", 2), "bench")
    found = costmodel.model_crossover(cpu, gpu, measured=(142.0,))
    assert found.winner == "gpu"
    assert found.size == pytest.approx(CROSSING, rel=0.05)
    assert found.interval[0] <= CROSSING <= found.interval[1]
    assert found.found_in == 1.0
    assert "gpu faster from n ~ 14" in found.describe()
    # The other way round: the first series wins above the crossing.
    assert costmodel.model_crossover(gpu, cpu).winner == "gpu"


def test_identical_backends_get_no_predicted_winner():
    # A/A: two draws of the same cost; wherever the fitted curves happen to
    # cross, the noise test finds no difference, so no side is called faster.
    from pytest_lyapax.report.series import SizedBenchmark

    same = {"cpu": series("cpu", 5), "cpu2": series("cpu", 6)}
    model = costmodel.benchmark_model(SizedBenchmark("b", "b", series=same))
    (pair,) = model.crossovers
    assert pair.size is None and pair.winner is None
    assert "no difference at any measured size" in pair.describe()
    assert not any("faster" in line for line in model.lines())


def test_a_series_that_is_no_power_law_does_not_fit():
    rng = np.random.default_rng(4)
    points = [
        point(n, np.exp(n / 150) * 1e-3 * np.exp(rng.normal(0, 0.02, 20)))
        for n in SIZES
    ]
    fit = costmodel.fit_series("cpu", points)
    assert fit.status == costmodel.NO_FIT
    assert fit.a is None and fit.p is None
    assert "does not fit" in fit.describe()
    gpu = costmodel.fit_series("gpu", series("gpu"))
    pair = costmodel.model_crossover(fit, gpu)
    assert pair.size is None and "cpu (does not fit)" in pair.describe()


def test_too_few_sizes_and_determinism():
    few = costmodel.fit_series("cpu", series("cpu", sizes=(10, 20, 50)))
    assert few.status == costmodel.FEW_SIZES and few.a is None
    one = costmodel.fit_series("gpu", series("gpu", 7), "b")
    costmodel._fit.cache_clear()  # refit, do not recall
    two = costmodel.fit_series("gpu", series("gpu", 7), "b")
    assert one is not two
    assert one == two  # seeded bootstrap: the same numbers every time


def synthetic_report(oom=True):
    """A report in the plugin's layout, schema-3 fields included."""
    rng = np.random.default_rng(5)
    benches = []
    for backend in ("cpu", "gpu"):
        a, b, p = TRUTH[backend]
        for n in SIZES[:-1]:
            t = samples(a, b, p, n, rng)
            pt = point(n, t)
            benches.append(
                {
                    "name": f"test_k[{backend}-{n}]",
                    "fullname": f"perf/test_k.py::test_k[{backend}-{n}]",
                    "params": {"jax_backend": backend, "jax_size": n},
                    "stats": {
                        "min": float(t.min()),
                        "max": float(t.max()),
                        "mean": float(t.mean()),
                        "stddev": float(t.std()),
                        "median": pt.median,
                        "q1": pt.q1,
                        "q3": pt.q3,
                        "iqr": pt.q3 - pt.q1,
                        "rounds": len(t),
                        "data": list(pt.samples),
                    },
                    "extra_info": {
                        "backend": backend,
                        "size": n,
                        "device": "cpu" if backend == "cpu" else "Fake <GPU>",
                        "warmup": {
                            "kind": "compile",
                            "first_call_s": 0.5,
                            "trace_lower_s": 0.125,
                            "compile_s": 0.25,
                            "cache": {"enabled": True, "hit": False},
                        },
                        "memory": {
                            "device_peak_bytes": None,
                            "argument_bytes": 8 * n * n,
                            "output_bytes": 8 * n,
                            "temp_bytes": 2048,
                            "host_peak_rss_bytes": 300 * 2**20,
                        },
                        "time_split": {
                            "dispatch_s": 1e-5,
                            "device_s": 2e-4,
                            "calls": 5,
                        },
                        "args_on": "device",
                        # As the report stores it: annotated (report/roofline.py).
                        "roofline": {
                            "source": "xla cost analysis",
                            "flops": 2.0 * n * n,
                            "bytes": 8.0 * n * n,
                            "intensity": 0.25,
                            "achieved_flops_per_s": 2.0 * n * n / pt.median,
                            "achieved_bytes_per_s": 8.0 * n * n / pt.median,
                            "bound": "bandwidth",
                            "fraction": 0.5,
                        },
                    },
                }
            )
    key = {
        "schema": SCHEMA_VERSION,
        "plugin_version": "0.0-test",
        "complete": True,
        "backends": [
            {"label": "cpu", "status": "ok", "reason": "", "n_benchmarks": 6},
            {
                "label": "gpu",
                "status": "ok",
                "reason": "<script>alert('x')</script> | *bold* http://evil.example/",
                "device": "Fake <GPU>",
                "n_benchmarks": 6,
            },
        ],
        "run_order": ["cpu", "gpu"],
        "machines": {
            label: {
                "peaks": {
                    "flops_per_s": 1e11,
                    "bandwidth_bytes_per_s": 5e10,
                    "launch_s": 5e-6,
                }
            }
            for label in ("cpu", "gpu")
        },
        "noise_test": {"test": "Mann-Whitney U", "alpha": 0.01},
        "comparison": {
            "with": "saved.json",
            "gates": ["median:25%"],
            "refused": None,
            "compared": 12,
            "regressions": ["perf/test_k.py::test_k[gpu-500]"],
            "missing": [],
            "verdicts": {"perf/test_k.py::test_k[gpu-500]": "slower"},
        },
    }
    if oom:
        key["points"] = [
            {
                "fullname": "perf/test_k.py::test_k[gpu-1000]",
                "backend": "gpu",
                "size": 1000,
                "status": "oom",
                "message": "RESOURCE_EXHAUSTED: Out of memory <img src=x>",
            }
        ]
    data = {
        "machine_info": {"node": "host<1>", "machine": "x86_64", "system": "Linux"},
        "commit_info": {"id": "deadbeef"},
        "benchmarks": benches,
        "datetime": "2026-12-01T12:00:00+00:00",
        "version": "5.3.1",
        "pytest_lyapax": key,
    }
    check_report(data, "synthetic")
    return data


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """summary.md and report.html of the synthetic report, written to disk."""
    out = tmp_path_factory.mktemp("rendered")
    files = render.outputs(synthetic_report())
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out, {name: data.decode() for name, data in files.items()}


def test_summary_markdown_says_it_in_words(rendered):
    _, files = rendered
    md = files[render.SUMMARY_NAME]
    assert md.startswith("# pytest-lyapax report\n")
    assert "| size | cpu | gpu | gpu speedup |" in md
    assert "cost model cpu: fixed " in md and "grows like n^2.0" in md
    assert re.search(r"cost model gpu faster from n \\~ 1[34]\d \\\[", md)
    assert "gpu at 1000: oom" in md
    assert "gate median:25%: FAILED: 1 regression(s)" in md
    assert "| perf/test\\_k.py::test\\_k\\[gpu-500\\] | slower |" in md
    # compile / memory table, one row per benchmark, with the measured bytes
    assert "compile 250 ms + trace/lower 125 ms (cache miss)" in md
    assert "| 78.1 KiB |" in md  # 8 * 100**2 bytes of arguments at n = 100
    # Untrusted text cannot open HTML, a link or a table cell.
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;" in md and "\\| \\*bold\\*" in md


class _Structure(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.urls, self.headings, self._in_h = [], [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_h = tag in ("h1", "h2")
        for name, value in attrs:
            if name in ("src", "href", "action", "poster", "data"):
                self.urls.append(value or "")

    def handle_data(self, data):
        if self._in_h:
            self.headings.append(data)

    def handle_endtag(self, tag):
        self._in_h = False


def test_html_report_structure_is_self_contained_and_escaped(rendered):
    _, files = rendered
    page = files[render.HTML_NAME]
    parsed = _Structure()
    parsed.feed(page)
    assert parsed.tags.count("table") >= 5  # header, backends, sizes, memory, machine
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert parsed.tags.count("img") == 2  # crossover.png and roofline.png
    assert all(u.startswith("data:image/png;base64,") for u in parsed.urls)
    assert "Backends" in parsed.headings and "Machine" in parsed.headings
    assert "test_k: median wall time per call" in parsed.headings
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "Fake &lt;GPU&gt;" in page and "host&lt;1&gt;" in page
    assert "default-src 'none'" in page


def test_reports_before_schema_3_show_not_measured():
    data = json.loads((DOCS / "gpu_acceleration_reference.json").read_text())
    md = render.summary_markdown(view_of(data)).decode()
    assert "first call 1.23 s (no compile split)" in md  # not called "compile"
    assert "written before report schema 3" in md
    assert "cost model cpu:" in md  # fitted, or said not to fit
    data["pytest_lyapax"]["points"] = "garbage"
    data["benchmarks"][0]["extra_info"]["memory"] = {"argument_bytes": "many"}
    render.outputs(data)  # malformed optional fields are shown as "-"


def test_the_view_groups_as_the_plugin_does():
    data = synthetic_report(oom=False)
    view = view_of(data)
    assert [b.key for b in view.benches] == [
        b.key for b in group_sized(data["benchmarks"], ["cpu", "gpu"])
    ]
    assert [m.key for m in view.models] == [b.key for b in view.benches]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(args, tmp_path, netlog):
    """Run headless chromium with every host name unresolvable; return stdout."""
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # CI runs as root in a container
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--log-net-log={netlog}",
            "--window-size=1200,2000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s(120),
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def page_requests(netlog):
    """URLs the page asked the network for (chromium's own background
    requests, e.g. its update check, are not made on behalf of a file:// page)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start
        and str(e.get("params", {}).get("network_isolation_key", "")).startswith(
            "file://"
        )
    ]


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium)"
)
def test_report_html_renders_in_headless_chromium(rendered, tmp_path):
    out, _ = rendered
    page = (out / render.HTML_NAME).as_uri()
    dom = chromium(["--dump-dom", page], tmp_path, tmp_path / "net.json")
    assert "<table>" in dom and "test_k: median wall time per call" in dom
    assert 'id="crossover-figure"' in dom and "Compile, memory" in dom
    assert 'id="roofline-figure"' in dom and "50 % of measured bandwidth" in dom
    assert "<script>alert" not in dom  # escaped text stayed text
    assert page_requests(tmp_path / "net.json") == []
    shot = tmp_path / "shot.png"
    chromium([f"--screenshot={shot}", page], tmp_path, tmp_path / "net2.json")
    from matplotlib import image

    pixels = image.imread(shot, format="png")
    assert pixels.shape[:2] == (2000, 1200)
    # Not a blank page: the figure's colours (curves, legend) were painted.
    colours = {
        tuple(px) for px in (pixels[::4, ::4, :3] * 255).astype(int).reshape(-1, 3)
    }
    assert len(colours) > 50
    # The detector has teeth: a page with an external image is caught.
    control = tmp_path / "control.html"
    control.write_text('<img src="http://example.invalid/x.png">')
    chromium(["--dump-dom", control.as_uri()], tmp_path, tmp_path / "net3.json")
    assert page_requests(tmp_path / "net3.json") == ["http://example.invalid/x.png"]


def test_the_backends_tables_name_how_the_rounds_were_timed():
    from pytest_lyapax.views import runtext

    report = synthetic_report()
    for record in report["benchmarks"]:
        label = record["extra_info"]["backend"]
        record["extra_info"]["rounds_mode"] = (
            "interleaved" if label == "cpu" else "sequential"
        )
    view = view_of(report)
    summary = render.summary_markdown(view).decode()
    table = [line for line in summary.splitlines() if line.startswith("| ")]
    assert any("rounds" in line for line in table)
    assert any(line.startswith("| cpu ") and "interleaved" in line for line in table)
    assert any(line.startswith("| gpu ") and "sequential" in line for line in table)
    terminal = runtext.backend_lines(view).blocks[0]
    assert "rounds" in terminal.header
    rows = {row[0]: row for row in terminal.rows}
    assert "interleaved" in rows["cpu"] and "sequential" in rows["gpu"]
