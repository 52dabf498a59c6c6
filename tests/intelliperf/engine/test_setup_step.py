"""What a backend must build before its first pass (Accordo's CUPTI library) is its own announced step, timed
apart from the timing pass, and skipped when it is built already."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from intelliperf.contract import Application, JobSpec
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.gpu.backend import TimingPass
from intelliperf.gpu.replay import ReplayBackend
from tests.recorded import EXAMPLES, RECORDED


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def start(self, stage: str, detail: str = "") -> None:
        self.seen.append(("start", stage, detail))

    def done(self, stage: str, detail: str = "") -> None:
        self.seen.append(("done", stage, detail))

    def note(self, message: str) -> None:
        self.seen.append(("note", "", message))


class FirstUse(ReplayBackend):
    """A recorded profile on a machine where the native library is not built yet (no CUPTI here to build
    the real one)."""

    def __init__(self, folder: Path, built: bool) -> None:
        super().__init__(folder)
        self.built = built
        self.order: list[str] = []

    def setup_needed(self) -> str | None:
        return None if self.built else "building Accordo's CUPTI library"

    def setup(self) -> None:
        self.order.append("setup")
        self.built = True

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        self.order.append("timing")
        return super().time_kernels(argv, cwd=cwd, timeout_s=timeout_s)


def diagnose(backend: FirstUse, events: Events):
    spec = JobSpec(applications=[Application(command=["./app"])], formula="diagnoseOnly")
    return run_diagnosis(spec, backend=backend, project=EXAMPLES / "transpose_bank", progress=events)


def test_first_use_builds_before_the_timing_pass_as_its_own_step() -> None:
    backend, events = FirstUse(RECORDED / "transpose_bank" / "original", built=False), Events()
    report = diagnose(backend, events)
    assert backend.order == ["setup", "timing"]
    assert ("start", "setup", "building Accordo's CUPTI library") in events.seen
    stages = [stage for kind, stage, _ in events.seen if kind == "start"]
    assert stages.index("setup") < stages.index("timing")
    assert report.passes.setup_s is not None and report.passes.setup_s >= 0


def test_nothing_to_build_means_no_setup_step() -> None:
    backend, events = FirstUse(RECORDED / "transpose_bank" / "original", built=True), Events()
    report = diagnose(backend, events)
    assert backend.order == ["timing"] and not any(stage == "setup" for _, stage, _ in events.seen)
    assert report.passes.setup_s is None
