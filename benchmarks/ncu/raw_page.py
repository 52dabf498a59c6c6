"""Write a report's raw page (kernel-level metrics) as CSV, read with the report reader ncu ships.

Run as a script, in its own interpreter, by `benchmarks.ncu.pages.read_raw_page`:

    python3 -I raw_page.py REPORT NCU_PYTHON_DIR [METRIC,METRIC,...]

NCU_PYTHON_DIR is the folder of ``ncu_report.py`` (``<ncu install>/extras/python``). With a list of
metrics, only those columns are written (a metric the report lacks is ``n/a``); without, every metric of
the report. The output has the layout of
``ncu --import REPORT --page raw --csv --print-units base --print-kernel-base mangled`` (a header row, a
units row, one row per profiled launch; every quantity in its base unit), which
`benchmarks.ncu.pages.parse_raw_csv` reads, so recordings made either way parse alike. Values carry full
precision where ncu's page rounds to two decimals.

Why a script: measured on an H100 (ncu 2025.3.1), ncu's export took 0.56 to 0.69 s per report, this
reader 0.23 to 0.28 s including its interpreter's start, and for tile_sums' 8 kernels 0.20 s when it reads
only the metrics the counter pass asked for against 0.28 s reading every metric of the report; a
separate interpreter keeps ncu's native module out of the caller's process. Standard library only.
"""

from __future__ import annotations

import csv
import sys
from typing import Any

FIXED_COLUMNS = ("ID", "Kernel Name")
UNAVAILABLE = "n/a"


def metric_text(report_module: Any, metric: Any) -> str:
    """A metric's value as the raw page prints it; n/a for a kind the page would not show as a value."""
    kind = metric.kind()
    if kind == _kind(report_module, "STRING"):
        return str(metric.as_string())
    if kind in (_kind(report_module, "FLOAT"), _kind(report_module, "DOUBLE")):
        return repr(float(metric.as_double()))
    if kind in (_kind(report_module, "UINT32"), _kind(report_module, "UINT64")):
        return str(int(metric.as_uint64()))
    return UNAVAILABLE


def _kind(report_module: Any, name: str) -> object:
    return getattr(report_module.IMetric, f"ValueKind_{name}", object())


def raw_page_rows(report_module: Any, report_path: str, wanted: list[str] | None = None) -> list[list[str]]:
    """The raw page's rows: every metric of the report, or the ``wanted`` ones (columns in that order)."""
    context = report_module.load_report(report_path)
    launches: list[tuple[str, dict[str, tuple[str, str]]]] = []
    names: dict[str, None] = dict.fromkeys(wanted or ())
    for range_index in range(context.num_ranges()):
        profiled = context.range_by_idx(range_index)
        for action_index in range(profiled.num_actions()):
            action = profiled.action_by_idx(action_index)
            values: dict[str, tuple[str, str]] = {}
            for name in wanted if wanted is not None else action.metric_names():
                metric = action.metric_by_name(name)
                if metric is None:
                    continue
                values[name] = (metric.unit(), metric_text(report_module, metric))
                names.setdefault(name)
            launches.append((action.name(report_module.IAction.NameBase_MANGLED), values))
    metric_names = list(names) if wanted is not None else sorted(names)
    units: dict[str, str] = {}
    for _, values in launches:
        for name, (unit, _text) in values.items():
            units.setdefault(name, unit)
    rows = [[*FIXED_COLUMNS, *metric_names], ["", "", *(units.get(name, "") for name in metric_names)]]
    for index, (kernel, values) in enumerate(launches):
        rows.append([str(index), kernel, *(values.get(name, ("", UNAVAILABLE))[1] for name in metric_names)])
    return rows


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: raw_page.py REPORT NCU_PYTHON_DIR [METRIC,METRIC,...]\n")
        return 2
    report_path, module_dir = argv[1], argv[2]
    wanted = [name for name in argv[3].split(",") if name] if len(argv) == 4 else None
    sys.path.insert(0, module_dir)
    import ncu_report  # type: ignore[import-not-found]  # lives in ncu's install folder

    writer = csv.writer(sys.stdout, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows(raw_page_rows(ncu_report, report_path, wanted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
