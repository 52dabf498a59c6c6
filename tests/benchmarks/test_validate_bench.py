"""benchmarks/validate.py on the CPU: which GPU measured each section when a run measures some of them."""

from __future__ import annotations

from benchmarks.validate import SECTIONS, section_devices


def test_a_run_of_some_sections_keeps_the_earlier_devices_of_the_others() -> None:
    earlier = {"device": "NVIDIA H100 80GB HBM3"}
    devices = section_devices(earlier, {"cases", "stability"}, "NVIDIA H200")
    assert devices == {
        "cases": "NVIDIA H200",
        "examples": "NVIDIA H100 80GB HBM3",
        "speedup": "NVIDIA H100 80GB HBM3",
        "stability": "NVIDIA H200",
    }
    again = section_devices({"device": "NVIDIA H200", "devices": devices}, {"examples"}, "NVIDIA H200")
    assert again["speedup"] == "NVIDIA H100 80GB HBM3" and again["examples"] == "NVIDIA H200"


def test_a_first_run_of_some_sections_knows_no_device_for_the_others() -> None:
    devices = section_devices({}, {"speedup"}, "NVIDIA H200")
    assert devices == {section: ("NVIDIA H200" if section == "speedup" else None) for section in SECTIONS}
