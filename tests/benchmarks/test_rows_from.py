"""benchmarks.common's join of earlier outputs' rows with a new run's (``--rows-from`` of diagnose, proton,
thirdparty and loop): which row wins, in what order, and which earlier outputs are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.common import earlier_outputs, joined_rows

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def written(folder: Path, file: str, output: dict) -> Path:
    path = folder / file
    path.write_text(json.dumps(output))
    return path


def test_a_name_measured_again_replaces_every_earlier_row_of_it() -> None:
    earlier = [
        {
            "examples": [
                {"example": "a", "variant": "original", "run": "old"},
                {"example": "a", "variant": "fixed", "run": "old"},
                {"example": "b", "variant": "original", "run": "old"},
            ]
        }
    ]
    now = [{"example": "a", "variant": "original", "run": "new"}]
    rows = joined_rows(earlier, now, key="example", order=["a", "b"])
    assert rows == [
        {"example": "a", "variant": "original", "run": "new"},  # a's old fixed row went with it
        {"example": "b", "variant": "original", "run": "old"},
    ]


def test_a_later_earlier_output_replaces_an_older_one_and_no_name_is_counted_twice() -> None:
    older = {"examples": [{"name": "a", "run": 1}, {"name": "b", "run": 1}]}
    newer = {"examples": [{"name": "b", "run": 2}]}
    assert joined_rows([older, newer], [], key="name", order=["a", "b"]) == [
        {"name": "a", "run": 1},
        {"name": "b", "run": 2},
    ]
    assert joined_rows([older, older], [], key="name", order=["a", "b"]) == older["examples"]


def test_rows_follow_the_manifest_and_names_outside_it_come_last_in_the_order_met() -> None:
    earlier = [{"rows": [{"name": "gone"}, {"name": "c"}, {"name": "renamed"}]}]
    now = [{"name": "b"}, {"name": "new-outside"}, {"name": "a"}]
    rows = joined_rows(earlier, now, key="name", order=["a", "b", "c", "never-run"], field="rows")
    assert [row["name"] for row in rows] == ["a", "b", "c", "gone", "renamed", "new-outside"]


def test_a_names_rows_keep_their_order_and_the_inputs_are_left_as_they_were() -> None:
    earlier = [{"examples": [{"example": "b", "variant": "fixed"}, {"example": "b", "variant": "original"}]}]
    now = [{"example": "a", "variant": "original"}]
    before = json.dumps([earlier, now])
    rows = joined_rows(earlier, now, key="example", order=["a", "b"])
    assert [(r["example"], r["variant"]) for r in rows] == [
        ("a", "original"),
        ("b", "fixed"),
        ("b", "original"),
    ]
    assert json.dumps([earlier, now]) == before


def test_without_earlier_outputs_the_runs_rows_are_all_there_is() -> None:
    assert earlier_outputs([], H200) == [] and earlier_outputs([], None) == []
    now = [{"name": "b"}, {"name": "a"}]
    assert joined_rows([], now, key="name", order=["a", "b"]) == [{"name": "a"}, {"name": "b"}]


def test_earlier_outputs_of_this_runs_device_are_read(tmp_path: Path) -> None:
    output = {"device": H200, "examples": [{"name": "a"}]}
    assert earlier_outputs([written(tmp_path, "a.json", output)], H200) == [output]


def test_an_earlier_output_from_another_device_is_refused(tmp_path: Path) -> None:
    paths = [
        written(tmp_path, "a.json", {"device": H200, "examples": []}),
        written(tmp_path, "b.json", {"device": H100, "examples": []}),
    ]
    with pytest.raises(ValueError, match=f"the earlier rows come from {H100}, this run from {H200}"):
        earlier_outputs(paths, H200)
    with pytest.raises(ValueError, match=f"come from {H200}, this run from {H100}"):
        earlier_outputs(paths[:1], H100)


def test_without_a_run_here_the_earlier_outputs_must_name_one_device(tmp_path: Path) -> None:
    same = [written(tmp_path, f"{n}.json", {"device": H200, "examples": []}) for n in ("a", "b")]
    assert len(earlier_outputs(same, None)) == 2
    other = written(tmp_path, "c.json", {"device": H100, "examples": []})
    with pytest.raises(ValueError, match=f"2 devices: {H100}, {H200}"):
        earlier_outputs([*same, other], None)


@pytest.mark.parametrize("output", [{"examples": []}, {"device": None, "examples": []}, {"device": ""}])
@pytest.mark.parametrize("device", [H200, None])
def test_an_earlier_output_that_names_no_device_is_refused(
    tmp_path: Path, output: dict, device: str | None
) -> None:
    """Nothing says which GPU measured its rows, so they cannot be set beside this device's."""
    good = written(tmp_path, "good.json", {"device": H200, "examples": []})
    unnamed = written(tmp_path, "unnamed.json", output)
    with pytest.raises(ValueError, match=r"unnamed\.json names no device"):
        earlier_outputs([good, unnamed], device)
