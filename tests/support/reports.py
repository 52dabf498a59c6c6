"""Report parts for tests, built one way: a diagnosis and a ranked kernel with sane defaults, every field
a test cares about a keyword. (The engine makes these from profiles; tests that need one without a GPU
make it here.)"""

from __future__ import annotations

from collections.abc import Sequence

from intelliperf.contract import Diagnosis, RankedKernel
from intelliperf.contract.report import SourceLocation

__all__ = ["make_diagnosis", "make_kernel"]


def make_diagnosis(
    kernel: str = "k",
    formula: str = "bankConflict",
    *,
    present: bool = True,
    saving_ns: float = 1.0,
    saving_fraction: float = 0.5,
    summary: str = "s",
    reasoning: str = "r",
    locations: Sequence[tuple[str, int] | SourceLocation] = (),
    severity: str | None = None,
    metrics: dict[str, float] | None = None,
) -> Diagnosis:
    """A formula's verdict on ``kernel``: severity "high" when present, "none" when not (unless given);
    ``locations`` as (file, line), each carrying half of the excess, or as the SourceLocation itself."""
    return Diagnosis(
        kernel=kernel,
        formula=formula,
        present=present,
        severity=severity or ("high" if present else "none"),  # type: ignore[arg-type]
        estimated_saving_ns=saving_ns,
        estimated_saving_fraction=saving_fraction,
        summary=summary,
        reasoning=reasoning,
        metrics=metrics or {},
        locations=[
            place
            if isinstance(place, SourceLocation)
            else SourceLocation(file=place[0], line=place[1], share=0.5)
            for place in locations
        ],
    )


def make_kernel(
    rank: int,
    name: str,
    *,
    median_ns: float = 10.0,
    launches: int = 1,
    share: float = 0.5,
    library: bool = False,
    demangled: str | None = None,
) -> RankedKernel:
    """A ranked kernel whose mean is its median (1% more with several launches) and total their product."""
    return RankedKernel(
        rank=rank,
        name=name,
        demangled=demangled if demangled is not None else f"{name}()",
        launches=launches,
        total_ns=int(median_ns * launches),
        mean_ns=median_ns * (1.01 if launches > 1 else 1.0),
        median_ns=median_ns,
        share=share,
        library=library,
    )
