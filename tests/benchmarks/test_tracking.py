"""benchmarks/tracking.py on the CPU: its noise comes from recorded files, its figures are shares, and they
tell a detector that never fires and one that always fires from a working one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.tracking import (
    COMMITS,
    MIN_LAUNCHES,
    ROOT,
    SPACING,
    TARGETS,
    TOLERANCE,
    load_sources,
    main,
    make_history,
    match,
    run,
)
from intelliperf.tracking.changepoints import ChangePoint, CommitTimes


@pytest.fixture(scope="module")
def sources():
    return load_sources()


def alarm(index: int, change: float) -> ChangePoint:
    return ChangePoint(
        index=index,
        commit=f"c{index}",
        before_ns=1.0,
        after_ns=1.0 + change,
        change=change,
        low=change - 0.01,
        high=change + 0.01,
        confidence=0.99,
        code_changed=None,
    )


def never(series: list[CommitTimes]) -> list[ChangePoint]:
    return []


def always(series: list[CommitTimes]) -> list[ChangePoint]:
    return [alarm(i, 0.1 if i % 2 else -0.1) for i in range(3, len(series) - 2, 3)]


def test_the_noise_comes_from_recorded_gpu_timings_in_the_repository(sources) -> None:
    assert len(sources.kernels) >= 20
    for kernel in sources.kernels:
        assert (ROOT / kernel.file).is_file() and ("/original/" in kernel.file or "/fixed/" in kernel.file)
        assert kernel.relative.size >= MIN_LAUNCHES and np.median(kernel.relative) == pytest.approx(1.0)
    drift = sources.drift
    assert sources.drift_sd == max(
        drift[k]["sd"] for k in ("unchanged_kernels", "validate_speedup_cv", "capture_runs")
    )
    assert 0 < sources.drift_sd < 0.05
    assert drift["capture_runs"]["runs"] == 24
    files = [*drift["capture_runs"]["files"], drift["validate_speedup_cv"]["file"]]
    assert all((ROOT / f).is_file() for f in files)
    # a kernel that the example's fix targets is never taken for drift
    assert not any(p["kernel"] == "_Z12block_reducePKfPfi" for p in drift["unchanged_kernels"]["pairs"])


def test_a_history_starts_at_the_recorded_level_and_steps_where_it_says(sources) -> None:
    kernel = sources.kernels[0]
    h = make_history(np.random.default_rng(0), kernel, 0.0, [0.2, -0.1, 0.3], launches=20)
    assert len(h.series) == COMMITS and all(len(c.samples) == 3 for c in h.series)
    positions = [p for p, _ in h.steps]
    assert positions == sorted(positions) and positions[0] >= SPACING and positions[-1] <= COMMITS - SPACING
    assert all(b - a >= SPACING for a, b in itertools.pairwise(positions))
    first = np.median([s for c in h.series[: positions[0]] for s in c.samples])
    assert first == pytest.approx(kernel.median_ns, rel=0.05)
    after = np.median(h.series[positions[0]].samples)
    assert after / first == pytest.approx(1.2, rel=0.06)


def test_matching_counts_exact_misplaced_wrong_sign_and_extra_detections() -> None:
    steps = [(20, 0.1), (50, -0.2), (80, 0.05)]
    found = [alarm(20, 0.1), alarm(50 + TOLERANCE, -0.2), alarm(80, -0.05), alarm(5, 0.3)]
    outcomes, extra = match(steps, found)
    assert [(o.found, o.exact) for o in outcomes] == [(True, True), (True, False), (False, False)]
    assert outcomes[0].covered is True and outcomes[1].covered is None
    assert extra == 2  # the wrong-sign one and the one near no step
    outcomes, extra = match([(20, 0.1)], [alarm(20 + TOLERANCE + 1, 0.1)])
    assert not outcomes[0].found and extra == 1


def test_a_small_run_reports_shares_and_the_keys_the_issue_asks_for(sources) -> None:
    result = run(3, series=4, commits=40, launches=(1,), sources=sources)
    for key in (
        "recall",
        "exact_commit_share",
        "false_alarms_per_100_commits",
        "seed",
        "counts",
        "thresholds",
    ):
        assert key in result
    for key in (
        "recall",
        "exact_commit_share",
        "recall_exact",
        "interval_coverage",
        "null_series_with_alarm",
    ):
        assert 0.0 <= result[key] <= 1.0
    assert result["false_alarms_per_100_commits"] >= 0
    assert result["targets"] == TARGETS and set(result["met"]) == set(TARGETS)
    assert result["counts"]["null_commits"] == 4 * 40
    assert [row["effect"] for row in result["by_effect"]][2:] == ["5%-10%", "10%-20%", "20%-30%"]
    for row in result["by_effect"]:
        assert row["recall"] is None or 0.0 <= row["recall"] <= 1.0
    assert result["sources"]["drift"]["sd"] == sources.drift_sd
    json.dumps(result)


def test_a_detector_that_never_fires_finds_nothing_and_raises_no_alarm(sources) -> None:
    result = run(4, series=3, commits=40, launches=(1,), detector=never, sources=sources)
    assert result["recall"] == 0.0 and result["exact_commit_share"] is None
    assert result["false_alarms_per_100_commits"] == 0.0
    assert result["met"] == {
        "recall": False,
        "exact_commit_share": False,
        "false_alarms_per_100_commits": True,
    }


def test_a_detector_that_always_fires_is_caught_by_its_false_alarms(sources) -> None:
    result = run(5, series=3, commits=40, launches=(1, 20), detector=always, sources=sources)
    assert result["false_alarms_per_100_commits"] > 1.0
    assert result["met"]["false_alarms_per_100_commits"] is False
    assert result["spurious_per_100_commits_with_changes"] > 1.0


def test_main_writes_the_json(tmp_path: Path) -> None:
    out = tmp_path / "results" / "tracking.json"
    assert main(["--out", str(out), "--seed", "7", "--series", "2"]) == 0
    written = json.loads(out.read_text())
    assert written["seed"] == 7 and written["design"]["change_series_per_launches"] == 2
