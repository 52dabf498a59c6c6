from __future__ import annotations

import pytest

from benchmarks.counter_pass import per_kernel_cost


def test_the_fit_gives_the_cost_of_each_profiled_kernel_and_the_fixed_rest() -> None:
    rows = [{"profiled_kernels": k, "profile_s": 1.5 + 1.2 + 0.4 * k, "ncu_floor_s": 1.5} for k in (1, 2, 8)]
    fit = per_kernel_cost(rows)
    assert fit == {"seconds_per_kernel": pytest.approx(0.4), "fixed_seconds": pytest.approx(1.2)}
    assert per_kernel_cost(rows[:1]) is None


def test_each_plan_asks_ncu_for_what_it_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.counter_pass import plan_commands

    names = ["_Z1av", "_Z1bv", "_Z1cv", "_Z1dv"]
    commands = plan_commands(names, ["gpu__time_duration.sum", "launch__grid_size"], tmp_path)
    [one_run] = commands["one_run"]
    assert "--section" in one_run and "--metrics" in one_run and "--page" in one_run
    [with_sass] = commands["with_sass_kernel_metrics"]
    assert with_sass[with_sass.index("--metrics") + 1].split(",") == [
        "gpu__time_duration.sum",
        "launch__grid_size",
        "smsp__sass_inst_executed_op_global_atom.sum",
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    ]
    assert _without_metrics(with_sass) == _without_metrics(one_run)
    [kernel_level] = commands["kernel_level_only"]
    assert "--section" not in kernel_level and "--page" not in kernel_level and "--metrics" in kernel_level
    [source_only] = commands["source_section_only"]
    assert "--metrics" not in source_only and "--section" in source_only
    first, second = commands["two_stage_source_for_1"]
    assert first == kernel_level
    assert second[second.index("--kernel-id") + 1] == "::regex:^(_Z1av)$:1"
    assert "--metrics" not in second and "--section" in second
    three = commands["two_stage_source_for_3"][1]
    assert three[three.index("--kernel-id") + 1] == "::regex:^(_Z1av|_Z1bv|_Z1cv)$:1"
    assert "--import-source" not in commands["without_import_source"][0]
    assert commands["cache_control_none"][0][1:3] == ["--cache-control", "none"]
    assert commands["application_replay"][0][1:3] == ["--replay-mode", "application"]
    floor = commands["floor"][0]
    assert floor[floor.index("--kernel-id") + 1] == "::regex:^(no_kernel_is_named_this)$:1"
    assert commands["plain"] == [[]]
    assert all(c[c.index("--clock-control") + 1] == "none" for runs in commands.values() for c in runs if c)


def _without_metrics(command: list[str]) -> list[str]:
    at = command.index("--metrics")
    return command[:at] + command[at + 2 :]


def test_the_budget_keeps_metrics_in_order_while_they_fit() -> None:
    from benchmarks.counter_pass import metrics_past_budget

    capacity = {"lts": 2, "sm": 1}
    asked: list[list[str]] = []

    def fits(chosen: list[str]) -> bool:
        asked.append(chosen)
        return all(sum(m.startswith(unit) for m in chosen) <= room for unit, room in capacity.items())

    metrics = ["lts_a", "sm_a", "lts_b", "sm_b", "lts_c", "gpu_time"]
    assert metrics_past_budget(metrics, fits) == ["sm_b", "lts_c"]
    assert asked[-1] == ["lts_a", "sm_a", "lts_b", "gpu_time"]  # the left-out ones are not kept
    assert metrics_past_budget(list(reversed(metrics)), fits) == ["sm_a", "lts_a"]


def test_every_sm90_sub_unit_is_the_only_measure_of_its_unit_on_some_recorded_kernel() -> None:
    """Why no 3-pass plan that drops a memory sub-unit can be taken (benchmarks/results/
    counter_pass_budget.json): on the recorded raw pages, each one's absence under-reads its unit by over
    10 points somewhere, lts2xbar's on the locality example (vertical_stencil) and tag requests' on the
    PyTorch example."""
    from benchmarks.counter_pass import RECORDED, subunit_underread

    underread = subunit_underread(sorted(RECORDED.glob("**/raw.csv")))
    assert len(underread) == 6
    assert all(u["kernels"] >= 60 and u["most_points"] > 10 for u in underread.values())
    realtime = underread["lts__lts2xbar_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"]
    assert realtime["on"] == "vertical_stencil/original: _Z12blur_columnsPKfPfii"
    assert realtime["most_points"] == pytest.approx(36.25, abs=0.01)
    tags = underread["lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed"]
    assert tags["on"] == "torch_model/original: write_transposed" and tags["kernels_over_1_point"] == 1


def test_the_pass_budget_never_overwrites_the_plans_results() -> None:
    from benchmarks.counter_pass import default_out

    assert default_out(True).name == "counter_pass_budget.json"
    assert default_out(False).name == "counter_pass.json"
    assert default_out(True).parent == default_out(False).parent
