"""Rounds interleaved across backends: the turn server, the blocked verdict,
the concurrent scheduler and a run with two labels of one CPU."""

import threading
import time
from types import SimpleNamespace

import pytest
from support.deadlines import timeout_s

from pytest_lyapax.measuring.rounds import NoTurns, RoundsWatch, Turns
from pytest_lyapax.report import stats
from pytest_lyapax.run import turns as turns_module
from pytest_lyapax.run.scheduling import BackendScheduling
from pytest_lyapax.run.turns import TurnClient, TurnServer


@pytest.fixture
def server():
    turns = TurnServer()
    yield turns
    turns.close()


def _hold_in_thread(client, log, name):
    def run():
        client.hold()
        log.append((name, client.ticket))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_until(condition):
    deadline = time.monotonic() + timeout_s(10)
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_turn_waits_for_the_holder_and_alternates_when_both_want_it(server):
    a, b = TurnClient(server.address), TurnClient(server.address)
    a.hold()
    assert a.held and a.ticket == 1
    log = []
    waiting = _hold_in_thread(b, log, "b")
    _wait_until(lambda: len(server._queue) == 1)  # b is queued, not served
    assert log == []
    # a gives the turn away and asks again at once: b, who waited, goes first.
    a.release()
    again = _hold_in_thread(a, log, "a")
    waiting.join(timeout_s(10))
    assert log == [("b", 2)]
    b.release()
    again.join(timeout_s(10))
    assert log == [("b", 2), ("a", 3)]
    a.release()
    assert a.turns == 2 and b.turns == 1
    a.close(), b.close()


def test_a_worker_that_goes_away_gives_its_turn_up(server):
    a, b = TurnClient(server.address), TurnClient(server.address)
    a.hold()
    log = []
    waiting = _hold_in_thread(b, log, "b")
    _wait_until(lambda: len(server._queue) == 1)
    a.close()  # a crashed worker's connection closes without a release
    waiting.join(timeout_s(10))
    assert log == [("b", 2)]
    b.close()


def test_a_lone_worker_never_waits_and_a_lost_server_does_not_hang_it():
    turns = TurnServer()
    client = TurnClient(turns.address)
    for _ in range(3):
        client.hold()
        client.release()
    assert client.ticket == 3
    turns.close()
    gone = TurnClient("/nonexistent/lyapax-turns")  # nothing listens there
    gone.hold()
    assert not gone.held and gone.mode == "interleaved"
    client.close()


class _Recorded(NoTurns):
    """Turns that count holds and releases, as the rounds' watch asks."""

    slice_s = 0.0  # give the turn away after every round

    def __init__(self):
        self.events = []

    @property
    def mode(self):
        return "interleaved"

    @property
    def held(self):
        return bool(self.events) and self.events[-1] == "hold"

    def hold(self):
        self.ticket += 1
        self.events.append("hold")

    def release(self):
        self.events.append("release")


def test_the_watch_yields_between_rounds_and_records_each_timed_rounds_turn():
    turns = _Recorded()
    watch = RoundsWatch(turns)
    runner = watch.wrap(lambda loops: 1.0)
    for _ in range(4):  # one calibration round, then three timed ones
        runner(None)
    info = {}
    watch.finish(info, [1.0, 1.0, 1.0])
    assert turns.events[0] == "hold"
    assert turns.events.count("release") == 4  # the turn offered after each round
    assert info["rounds_mode"] == "interleaved"
    assert info["turns"] == [2, 3, 4]  # the last three rounds' turns


class _LongSlices(_Recorded):
    slice_s = 3600.0  # time never ends a turn here: only the planned share does


def test_planned_rounds_are_spread_over_at_least_min_turns():
    # A cold calibration call makes pytest-benchmark plan a fraction of
    # --benchmark-max-time; the turns then follow the rounds, not the clock.
    turns = _LongSlices()
    watch = RoundsWatch(turns)
    runner = watch.wrap(lambda loops: 1.0)
    runner(None)  # calibration: no plan yet, and the slice is long
    assert turns.events == ["hold"]
    rounds = 5 * turns.min_turns + 3
    watch.plan(rounds)
    for _ in range(rounds):
        runner(None)
    info = {}
    watch.finish(info, [1.0] * rounds)
    per_turn = rounds // turns.min_turns
    assert per_turn == 5
    assert len(set(info["turns"])) == -(-rounds // per_turn)  # ceil: 17 turns
    assert len(set(info["turns"])) >= turns.min_turns
    # After the last planned round the turn is kept: the test ends in it.
    assert turns.events[-1] == "hold"
    assert turns.events.count("release") == len(set(info["turns"])) - 1
    # Fewer rounds than min_turns: one round a turn.
    watch = RoundsWatch(turns := _LongSlices())
    runner = watch.wrap(lambda loops: 1.0)
    watch.plan(3)
    for _ in range(3):
        runner(None)
    watch.finish(info, [1.0] * 3)
    assert info["turns"] == [1, 2, 3]
    assert turns.events == ["hold", "release", "hold", "release", "hold"]
    # Rounds beyond the plan are not held forever: the time slice still yields.
    slices = _LongSlices()
    slices.slice_s = 0.0
    watch = RoundsWatch(slices)
    runner = watch.wrap(lambda loops: 1.0)
    watch.plan(1)
    for _ in range(3):
        runner(None)
    assert slices.events == ["hold", "release", "hold", "release", "hold"]


def test_the_planned_rounds_follow_pytest_benchmarks_rule():
    from pytest_lyapax.measuring.fixture import _planned_rounds

    def fixture(max_time, min_rounds, warmup=False):
        return SimpleNamespace(
            _max_time=max_time, _min_rounds=min_rounds, _warmup=warmup
        )

    assert _planned_rounds(fixture(0.5, 5), 1e-3, 1) == 500
    assert _planned_rounds(fixture(0.0, 5), 1e-3, 1) == 5  # --benchmark-max-time=0
    assert _planned_rounds(fixture(0.5, 5), 0.0, 1) == 5  # nothing measured
    # Warm-up rounds run first: min(rounds, warmup iterations / iterations).
    assert _planned_rounds(fixture(0.5, 5, 100000), 1e-3, 10) == 1000
    assert _planned_rounds(fixture(0.5, 5, 30), 1e-3, 10) == 503


def test_a_plan_changes_nothing_when_rounds_are_not_interleaved():
    class Sequential(_LongSlices):
        @property
        def mode(self):
            return "sequential"

    turns = Sequential()
    watch = RoundsWatch(turns)
    runner = watch.wrap(lambda loops: 1.0)
    watch.plan(64)
    for _ in range(64):
        runner(None)
    assert turns.events == ["hold"]  # held once, never given away


def test_sign_test_p_is_exact():
    assert stats.sign_test_p(0, 8) == pytest.approx(2 / 256)
    assert stats.sign_test_p(4, 8) == 1.0
    assert stats.sign_test_p(1, 10) == pytest.approx(2 * 11 / 1024)


def _interleaved(per_turn, turns, slow=1.0):
    """Round times of two sides in alternating turns; ``per_turn(k)`` is the
    machine's slowdown during the k-th pair of turns."""
    times_a, turns_a, times_b, turns_b = [], [], [], []
    for k in range(turns):
        load = per_turn(k)
        for r in range(5):
            wobble = 1.0 + 0.01 * ((r * 7 + k * 3) % 5)
            times_a.append(1e-3 * load * wobble)
            turns_a.append(2 * k + 1)
            times_b.append(1e-3 * load * wobble * slow)
            turns_b.append(2 * k + 2)
    return times_a, turns_a, times_b, turns_b


def test_a_load_that_comes_and_goes_is_no_difference_when_rounds_interleave():
    # The load lands on both sides' neighbouring turns alike (3x for a while).
    a, ta, b, tb = _interleaved(lambda k: 3.0 if 4 <= k < 9 else 1.0, 12)
    verdict = stats.judge(a, b, turns=(ta, tb))
    assert verdict.kind == stats.NOISE and verdict.pairs == 12
    # Timed one after another, a load on the first side's rounds only makes
    # the second look faster: what the interleaved turns prevent.
    loaded_first = [x * (3.0 if i < 30 else 1.0) for i, x in enumerate(a)]
    assert stats.judge(loaded_first, b).kind == stats.FASTER


def test_a_real_difference_is_found_under_the_same_load():
    a, ta, b, tb = _interleaved(lambda k: 3.0 if 4 <= k < 9 else 1.0, 12, slow=2.0)
    verdict = stats.judge(a, b, turns=(ta, tb))
    assert verdict.kind == stats.SLOWER
    assert verdict.ratio == pytest.approx(2.0)
    assert verdict.p == pytest.approx(2 / 2**12)


def test_too_few_turns_is_said_as_such():
    a, ta, b, tb = _interleaved(lambda k: 1.0, 5, slow=2.0)
    verdict = stats.judge(a, b, turns=(ta, tb))
    assert verdict.kind == stats.FEW and verdict.pairs == 5
    assert verdict.describe() == "too few interleaved turns (5 pairs < 8)"


def test_round_turns_are_read_only_when_they_match_the_rounds():
    record = {"stats": {"data": [1.0, 2.0]}, "extra_info": {"turns": [3, 5]}}
    assert stats.round_turns(record) == (3, 5)
    record["extra_info"]["turns"] = [3]
    assert stats.round_turns(record) == ()
    record["extra_info"]["turns"] = [True, 5]
    assert stats.round_turns(record) == ()
    assert stats.round_turns({"stats": {"data": [1.0]}}) == ()


class _Node:
    def __init__(self, label, log):
        self.label, self.log = label, log
        self.gateway = type("G", (), {"id": f"gw-{label}"})()

    def send_runtest_some(self, indices):
        self.log.append((self.label, "run", list(indices)))

    def shutdown(self):
        self.log.append((self.label, "shutdown"))


def test_concurrent_scheduling_starts_every_backend_at_once():
    log = []
    sched = BackendScheduling(["cpu", "gpu"], lambda n: n.label, concurrent=True)
    nodes = {label: _Node(label, log) for label in ("cpu", "gpu")}
    for node in nodes.values():
        sched.add_node(node)
        sched.add_node_collection(node, ["t.py::a", "t.py::b"])
    sched.schedule()
    assert log == [
        ("cpu", "run", [0, 1]),
        ("cpu", "shutdown"),
        ("gpu", "run", [0, 1]),
        ("gpu", "shutdown"),
    ]
    assert sched.running == {"cpu", "gpu"}
    for node in nodes.values():
        sched.mark_test_complete(node, 0)
        sched.mark_test_complete(node, 1)
    sched.remove_node(nodes["gpu"])
    assert not sched.tests_finished
    sched.remove_node(nodes["cpu"])
    assert sched.tests_finished


BENCH = """
import jax
import jax.numpy as jnp
import pytest

@pytest.mark.jax_sizes(64, 128, 256)
def test_work(benchmark, jax_backend, jax_size):
    x = jnp.linspace(0.0, 1.0, jax_size * 64)
    # cpu2 does twice the work: a second pass over the data.
    passes = 2 if jax_backend == "cpu2" else 1

    @jax.jit
    def f(x):
        def body(i, acc):
            return acc + jnp.sum(jnp.sin(x + i) * x)
        return jax.lax.fori_loop(0, 40 * passes, body, 0.0)

    benchmark(f, x)
"""

TWO_LABELS = (
    "--jax-backend=cpu,cpu2",
    "--jax-backend-platform=cpu2=cpu",
    "--benchmark-max-time=0.3",
    "--jax-no-peaks",
    "-p",
    "no:cacheprovider",
)


def _records(data):
    return {b["name"]: b for b in data["benchmarks"]}


@pytest.mark.slow
def test_two_labels_interleave_their_rounds_and_a_real_2x_is_found(
    pytester, run_pytest
):
    pytester.makepyfile(test_work=BENCH)
    report = pytester.path / "r"
    # 1 s a label, not TWO_LABELS' 0.3 s: the noise test needs 10 turns a
    # side at every size, which 0.3 s did not give under load (slow suite).
    proc, data = run_pytest(
        pytester.path,
        report,
        *TWO_LABELS,
        "--benchmark-max-time=1.0",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[one xdist worker per backend, rounds interleaved]" in proc.stdout
    records = _records(data)
    for size in (64, 128, 256):
        a = records[f"test_work[cpu-{size}]"]["extra_info"]
        b = records[f"test_work[cpu2-{size}]"]["extra_info"]
        assert a["rounds_mode"] == b["rounds_mode"] == "interleaved"
        # Disjoint turns that alternate: each side has turns between the
        # other's first and last.
        assert not set(a["turns"]) & set(b["turns"])
        assert any(min(b["turns"]) < t < max(b["turns"]) for t in a["turns"])
        # Enough turns to pair, however the calibration came out.
        for side in (a, b):
            if len(side["turns"]) >= Turns.min_turns:
                assert len(set(side["turns"])) >= Turns.min_turns, side["turns"]
    summary = (report / "summary.md").read_text()
    assert "cpu faster at" in summary.replace("\\", ""), summary
    # The sequential mode: no turns, and the report says which mode measured.
    report2 = pytester.path / "r2"
    proc, data = run_pytest(
        pytester.path,
        report2,
        *TWO_LABELS,
        "--jax-sequential",
        f"--jax-report-dir={report2}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[one xdist worker per backend, one backend at a time]" in proc.stdout
    for record in data["benchmarks"]:
        assert record["extra_info"]["rounds_mode"] == "sequential"
        assert "turns" not in record["extra_info"]


def test_the_first_turn_waits_for_every_worker_and_goes_to_the_first_in_run_order():
    turns = TurnServer(expected=2)
    late, first = TurnClient(turns.address, rank=1), TurnClient(turns.address, rank=0)
    log = []
    asked_first = _hold_in_thread(late, log, "rank 1")
    _wait_until(lambda: len(turns._queue) == 1)
    assert log == []  # not served while the other expected worker is missing
    asked_second = _hold_in_thread(first, log, "rank 0")
    asked_second.join(timeout_s(10))
    assert log == [("rank 0", 1)]
    first.release()
    asked_first.join(timeout_s(10))
    assert log == [("rank 0", 1), ("rank 1", 2)]
    late.close(), first.close()
    turns.close()


def test_the_worker_furthest_behind_in_its_tests_goes_first(server):
    ahead, behind, holder = (TurnClient(server.address) for _ in range(3))
    holder.progress = 9  # ahead of both: no one waits for it
    holder.hold()
    log = []
    ahead.progress, behind.progress = 5, 3
    first = _hold_in_thread(ahead, log, "ahead")
    _wait_until(lambda: len(server._queue) == 1)
    second = _hold_in_thread(behind, log, "behind")
    _wait_until(lambda: len(server._queue) == 2)
    holder.release()
    second.join(timeout_s(10))
    assert log == [("behind", 2)]
    behind.release()
    first.join(timeout_s(10))
    assert log == [("behind", 2), ("ahead", 3)]
    for client in (ahead, behind, holder):
        client.close()


def test_a_worker_ahead_waits_for_one_between_tests_unless_it_has_finished(
    server, monkeypatch
):
    # Long enough that only the laggard's request (or its "done") can end it.
    monkeypatch.setattr(turns_module, "LAGGARD_WAIT_S", 600.0)
    reference, other = TurnClient(server.address, 0), TurnClient(server.address, 1)
    log = []
    for client in (reference, other):  # test 1, one after the other
        client.progress = 1
        client.hold()
        client.release()
    other.progress = 2
    ahead = _hold_in_thread(other, log, "other")
    _wait_until(lambda: len(server._queue) == 1)
    time.sleep(0.2)
    assert log == []  # the reference, between its tests, is waited for
    reference.progress = 2
    _hold_in_thread(reference, log, "reference").join(timeout_s(10))
    assert log == [("reference", 3)]
    reference.release()
    ahead.join(timeout_s(10))
    assert log == [("reference", 3), ("other", 4)]
    other.release()
    reference.finish()  # its last test: no one waits for it any more
    other.progress = 3
    _hold_in_thread(other, log, "other").join(timeout_s(10))
    assert log[-1] == ("other", 5)
    reference.close(), other.close()


def test_no_turn_goes_out_before_the_reports_of_an_ended_test_arrive(
    server, monkeypatch
):
    # Long enough that only the report (or its loss) can end the wait.
    monkeypatch.setattr(turns_module, "REPORT_WAIT_S", 600.0)
    reference, other = TurnClient(server.address, 0), TurnClient(server.address, 1)
    log = []
    reference.progress = 1
    reference.hold()
    reference.ended()  # its reports are on their way to the controller
    reference.release()
    other.progress = 1
    waiting = _hold_in_thread(other, log, "other")
    _wait_until(lambda: len(server._queue) == 1)
    time.sleep(0.2)
    assert log == []  # the reference's report has not arrived
    server.reported(1)  # another rank's report does not count for rank 0
    time.sleep(0.2)
    assert log == []
    server.reported(0)
    waiting.join(timeout_s(10))
    assert log == [("other", 2)]
    other.ended()
    other.release()
    # A report that never comes (its worker died) is awaited REPORT_WAIT_S.
    monkeypatch.setattr(turns_module, "REPORT_WAIT_S", 0.3)
    reference.progress = 2
    start = time.monotonic()
    _hold_in_thread(reference, log, "reference").join(timeout_s(10))
    assert log[-1] == ("reference", 3) and time.monotonic() - start >= 0.25
    reference.close(), other.close()
