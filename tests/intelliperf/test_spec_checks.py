"""What the contract leaves to the doors: formula names and GPU vendors checked against what is installed
(intelliperf.spec_checks), with where in the spec each problem is."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from pydantic import ValidationError

from intelliperf import vendors
from intelliperf.contract import JobSpec
from intelliperf.errors import SpecError
from intelliperf.spec_checks import check_spec, spec_problems
from intelliperf.vendors import ENTRY_POINT_GROUP, vendor_names

APP = {"command": "./app"}


def test_the_contract_checks_a_names_form_not_whether_it_is_installed() -> None:
    spec = JobSpec.model_validate({"applications": [APP], "formula": "spills", "gpu": {"vendor": "intel"}})
    assert spec.formula == "spills" and spec.gpu.vendor == "intel"
    for bad in ({"formula": "no spaces"}, {"gpu": {"vendor": "Intel GPU"}}):
        with pytest.raises(ValidationError):
            JobSpec.model_validate({"applications": [APP], **bad})


def test_an_unknown_formula_is_said_where_it_was_written() -> None:
    sent = {"applications": [{**APP, "formula": "spills"}]}
    assert [where for where, _ in spec_problems(sent)] == [("applications", 0, "formula")]
    lifted = JobSpec.model_validate(sent)  # a sole application's formula becomes the spec's
    [(where, why)] = spec_problems(lifted)
    assert where == ("formula",) and why.startswith("unknown formula 'spills'; choose one of: bankConflict")
    assert spec_problems({"applications": [APP], "formula": "auto"}) == []
    assert spec_problems({"applications": [APP], "formula": "diagnoseOnly"}) == []


def test_a_vendor_without_a_backend_is_refused_and_the_first_problem_raised() -> None:
    spec = JobSpec.model_validate({"applications": [APP], "gpu": {"vendor": "intel"}})
    assert spec_problems(spec) == [
        (("gpu", "vendor"), "unknown GPU vendor 'intel'; the installed backends: nvidia, amd")
    ]
    with pytest.raises(SpecError, match="unknown GPU vendor 'intel'"):
        check_spec(spec)
    check_spec(JobSpec.model_validate({"applications": [APP], "gpu": {"vendor": "amd"}}))


def test_a_plugin_vendor_is_known_by_its_entry_point_name_without_loading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin = EntryPoint(name="intel", value="no_such_module:IntelBackend", group=ENTRY_POINT_GROUP)
    replacing = EntryPoint(name="amd", value="no_such_module:Other", group=ENTRY_POINT_GROUP)
    monkeypatch.setattr(
        vendors, "entry_points", lambda group: [plugin, replacing] if group == ENTRY_POINT_GROUP else []
    )
    assert vendor_names() == ["nvidia", "amd", "intel"]
    check_spec(JobSpec.model_validate({"applications": [APP], "gpu": {"vendor": "intel"}}))
