"""Option parsing: the pure parsers, and the usage error of every invalid value."""

import json

import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.run.options import (
    CompareThreshold,
    check_report_dir,
    load_compare_file,
    parse_backends,
    parse_compare_fail,
    parse_platform_mappings,
    parse_sizes,
    validate_marker_sizes,
)


class TestParseBackends:
    def test_builtin_labels_in_run_order(self):
        backends = parse_backends("gpu, cpu,tpu,rocm", {})
        assert [b.label for b in backends] == ["gpu", "cpu", "tpu", "rocm"]
        assert [b.platform for b in backends] == ["cuda", "cpu", "tpu", "rocm"]

    def test_gpu_is_exactly_cuda_and_cuda_is_an_alias(self):
        assert parse_backends("cuda", {}) == (Backend("gpu", "cuda"),)
        assert Backend("gpu", "cuda").expected == "gpu"

    def test_mapped_label(self):
        backends = parse_backends("cpu,cpu2", {"cpu2": "cpu"})
        assert backends[1] == Backend("cpu2", "cpu")
        assert backends[1].expected == "cpu"

    def test_mapping_overrides_builtin(self):
        assert parse_backends("gpu", {"gpu": "cuda,cpu"})[0].platform == "cuda,cpu"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("metal", "unknown backend 'metal'; choose from cpu, gpu, tpu, rocm, cuda"),
            ("", "empty list"),
            ("cpu,,gpu", "empty entry"),
            ("cpu,cpu", "listed twice"),
        ],
    )
    def test_invalid(self, text, message):
        with pytest.raises(pytest.UsageError, match=message):
            parse_backends(text, {})


class TestParsePlatformMappings:
    def test_valid(self):
        assert parse_platform_mappings(["cpu2=cpu", "fb = CUDA,cpu"]) == {
            "cpu2": "cpu",
            "fb": "cuda,cpu",
        }

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ("cpu2", "is not LABEL=PLATFORM"),
            ("=cpu", "is not LABEL=PLATFORM"),
            ("cpu2=", "is not LABEL=PLATFORM"),
            ("my-cpu=cpu", "must start with a lowercase letter"),
            ("2cpu=cpu", "must start with a lowercase letter"),
            ("x=opencl", "unknown JAX platform 'opencl'"),
        ],
    )
    def test_invalid(self, value, message):
        with pytest.raises(pytest.UsageError, match=message):
            parse_platform_mappings([value])

    def test_conflicting_duplicate(self):
        with pytest.raises(pytest.UsageError, match="mapped twice"):
            parse_platform_mappings(["x=cpu", "x=cuda"])


class TestSizes:
    def test_valid(self):
        assert parse_sizes("20, 50,2000") == (20, 50, 2000)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("20,abc", "'abc' is not a positive integer"),
            ("0", "'0' is not a positive integer"),
            ("-5", "'-5' is not a positive integer"),
            ("2.5", "'2.5' is not a positive integer"),
            ("", "'' is not a positive integer"),
            ("4,4", "listed twice"),
        ],
    )
    def test_invalid(self, text, message):
        with pytest.raises(pytest.UsageError, match=message):
            parse_sizes(text)

    def test_marker_sizes(self):
        assert validate_marker_sizes((3, 5), "t") == (3, 5)
        for bad in [(), (0,), (2.0,), (True,), (3, 3)]:
            with pytest.raises(ValueError, match="jax_sizes"):
                validate_marker_sizes(bad, "t")


class TestCompareFail:
    def test_relative(self):
        (threshold,) = parse_compare_fail(["median:25%"])
        assert threshold == CompareThreshold("median", 25.0, relative=True)
        assert threshold.exceeded(saved=1.0, now=1.3)
        assert not threshold.exceeded(saved=1.0, now=1.2)
        assert str(threshold) == "median:25%"

    def test_absolute_with_a_unit(self):
        (threshold,) = parse_compare_fail(["min:0.5s"])
        assert threshold == CompareThreshold("min", 0.5, relative=False)
        assert threshold.exceeded(saved=1.0, now=1.6)
        (ms,) = parse_compare_fail(["median:25ms"])
        assert ms.limit == pytest.approx(0.025) and str(ms) == "median:25ms"
        assert parse_compare_fail(["mean:1e-3s"])[0].limit == 1e-3
        assert parse_compare_fail(["max:3us"])[0].limit == pytest.approx(3e-6)

    def test_several_gates(self):
        gates = parse_compare_fail(["median:10%", "max:50%"])
        assert [str(g) for g in gates] == ["median:10%", "max:50%"]

    def test_a_bare_number_shows_both_forms(self):
        # Median:25 used to mean 25 seconds.
        with pytest.raises(pytest.UsageError) as info:
            parse_compare_fail(["median:25"])
        message = str(info.value)
        assert "has no unit" in message
        assert "median:25%" in message and "median:25ms" in message

    @pytest.mark.parametrize(
        "text", ["median", "median:", "p99:5%", "median:abc%", "5%", "median:5min"]
    )
    def test_invalid(self, text):
        with pytest.raises(pytest.UsageError, match="FIELD:PERCENT% or FIELD:TIME"):
            parse_compare_fail([text])


class TestPaths:
    def test_report_dir_checked_but_not_created(self, tmp_path):
        target = tmp_path / "a" / "b"
        assert check_report_dir(target) == target
        assert not (tmp_path / "a").exists()

    def test_report_dir_under_a_file(self, tmp_path):
        (tmp_path / "file").write_text("x")
        with pytest.raises(pytest.UsageError, match="cannot write reports to"):
            check_report_dir(tmp_path / "file" / "sub")
        with pytest.raises(pytest.UsageError, match="not a directory"):
            check_report_dir(tmp_path / "file")

    def test_compare_file(self, tmp_path):
        good = tmp_path / "good.json"
        good.write_text(json.dumps({"benchmarks": []}))
        assert load_compare_file(good) == {"benchmarks": []}
        with pytest.raises(pytest.UsageError, match="cannot read"):
            load_compare_file(tmp_path / "missing.json")
        (tmp_path / "bad.json").write_text("{not json")
        with pytest.raises(pytest.UsageError, match="not valid JSON"):
            load_compare_file(tmp_path / "bad.json")
        (tmp_path / "other.json").write_text("[1, 2]")
        with pytest.raises(pytest.UsageError, match="no 'benchmarks' list"):
            load_compare_file(tmp_path / "other.json")


# Every invalid value reaches the user as a usage error, raised while pytest
# configures, i.e. before any worker starts or anything is timed.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jax-backend=cpu,vulkan"], "unknown backend 'vulkan'"),
        (["--jax-backend=cpu", "--jax-backend-platform=cpu2"], "LABEL=PLATFORM"),
        (
            ["--jax-backend=cpu", "--jax-backend-platform=x=nope"],
            "unknown JAX platform",
        ),
        (["--jax-sizes=10,ten"], "'ten' is not a positive integer"),
        (["--jax-backend=cpu", "--jax-report-dir=afile/sub"], "cannot write reports"),
        (["--jax-backend=cpu", "--jax-compare=missing.json"], "cannot read"),
        (["--jax-backend=cpu", "--jax-compare=afile"], "not valid JSON"),
        (["--jax-backend=cpu", "--jax-compare-fail=median"], "FIELD:PERCENT%"),
        (["--jax-backend=cpu", "--jax-compare-fail=median:5%"], "needs a saved run"),
        (["--jax-compare=afile"], "--jax-compare needs --jax-backend=LIST"),
    ],
)
def test_usage_errors(pytester, args, message):
    pytester.path.joinpath("afile").write_text("not a directory, not json")
    with pytest.raises(pytest.UsageError, match=message):
        pytester.parseconfigure(*args)


def test_usage_error_from_ini(pytester):
    pytester.makeini("[pytest]\njax_backend = cpu,quantum\n")
    with pytest.raises(pytest.UsageError, match="unknown backend 'quantum'"):
        pytester.parseconfigure()


def test_usage_error_on_the_command_line(pytester):
    result = pytester.runpytest_subprocess("--jax-backend=cpu,gpux")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--jax-backend: unknown backend 'gpux'; choose from*"]
    )


def test_missing_sizes_is_a_collection_error(pytester):
    pytester.makepyfile(
        """
        def test_sized(jax_size):
            pass
        """
    )
    result = pytester.runpytest_inprocess("--collect-only", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*uses the jax_size fixture but declares no sizes*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
