"""The Action's inputs: read from the environment, checked, and turned into a JobSpec.

action.yml passes every input as ``INPUT_<NAME>`` (upper case), the convention of JavaScript actions.
An empty value means "not given" (GitHub passes unset inputs as empty strings). Every error names the
input it comes from, so the workflow author knows which line of their ``with:`` to fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from intelliperf.contract import JobSpec
from intelliperf.errors import plain_message
from intelliperf.spec_checks import spec_problems

__all__ = [
    "APPLICATION_KEYS",
    "ActionInputs",
    "GithubContext",
    "InputError",
    "build_spec",
    "idempotency_key",
    "read_inputs",
]

FailOn = Literal["never", "error", "no-speedup", "regression"]
Source = Literal["archive", "git"]
Mode = Literal["optimize", "track"]

# keys an entry of `applications` may have: the contract's Application fields, plus the spellings
# AMD's intelliperf-action accepts (build_script = build_command; project_directory, output_json)
APPLICATION_KEYS = (
    "command",
    "name",
    "build_command",
    "build_script",
    "instrument_command",
    "formula",
    "kernel",
    "top_n",
    "project_directory",
    "output_json",
)

# the input a JobSpec field comes from, to name it in validation errors
_INPUT_OF_FIELD = {
    "project_directory": "project_directory",
    "build_command": "build_command",
    "instrument_command": "instrument_command",
    "applications": "applications",
    "formula": "formula",
    "kernel": "kernel",
    "top_n": "top_n",
    "num_attempts": "num_attempts",
    "unittest_command": "unittest_command",
    "container": "docker_image",
    "gpu": "gpu_arch",
}


class InputError(ValueError):
    """An input that cannot be used; ``name`` is the input as written in the workflow."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"input '{name}': {message}")
        self.name = name


@dataclass(frozen=True)
class GithubContext:
    """What the runner tells about the run (GITHUB_* variables)."""

    workspace: str
    repository: str | None = None
    sha: str | None = None
    ref_name: str | None = None
    head_ref: str | None = None
    server_url: str = "https://github.com"
    run_id: str | None = None
    run_attempt: str | None = None
    job: str | None = None
    action: str | None = None
    base_ref: str | None = None  # a pull request's base branch
    event_path: str | None = None  # the event's payload (a pull request's number)
    api_url: str = "https://api.github.com"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GithubContext:
        def get(name: str) -> str | None:
            return env.get(name) or None

        return cls(
            workspace=env.get("GITHUB_WORKSPACE") or ".",
            repository=get("GITHUB_REPOSITORY"),
            sha=get("GITHUB_SHA"),
            ref_name=get("GITHUB_REF_NAME"),
            head_ref=get("GITHUB_HEAD_REF"),
            server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            run_id=get("GITHUB_RUN_ID"),
            run_attempt=get("GITHUB_RUN_ATTEMPT"),
            job=get("GITHUB_JOB"),
            action=get("GITHUB_ACTION"),
            base_ref=get("GITHUB_BASE_REF"),
            event_path=get("GITHUB_EVENT_PATH"),
            api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        )


@dataclass(frozen=True)
class ActionInputs:
    service_url: str
    service_token: str | None
    applications: list[dict[str, Any]]
    formula: str | None = None
    build_command: str | None = None
    instrument_command: str | None = None
    project_directory: str | None = None
    kernel: str | None = None
    top_n: int | None = None
    num_attempts: int | None = None
    unittest_command: str | None = None
    docker_image: str | None = None
    gpu_vendor: str | None = None
    gpu_arch: str | None = None
    model: str | None = None
    provider: str | None = None
    api_base: str | None = None
    create_pr: bool | None = None
    pr_labels: list[str] | None = None
    llm_gateway_key: str | None = None
    github_token: str | None = None
    spec_overrides: dict[str, Any] = field(default_factory=dict)
    source: Source = "archive"
    wait: bool = True
    timeout_minutes: float = 300.0
    fail_on: FailOn = "error"
    priority: int | None = None
    report_file: str = "intelliperf-report.json"
    idempotency_key: str | None = None
    mode: Mode = "optimize"
    base_branch: str | None = None
    min_effect: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def secrets(self) -> list[str]:
        return [s for s in (self.llm_gateway_key, self.github_token, self.service_token) if s]


def _raw(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(f"INPUT_{name.upper()}", "")
    value = value.strip()
    return value or None


def _bool(env: Mapping[str, str], name: str, default: bool | None) -> bool | None:
    value = _raw(env, name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ("true", "yes", "on", "1"):
        return True
    if lowered in ("false", "no", "off", "0"):
        return False
    raise InputError(name, f"expected true or false, got {value!r}")


def _int(env: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    value = _raw(env, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise InputError(name, f"expected a whole number, got {value!r}") from None
    if not low <= number <= high:
        raise InputError(name, f"must be between {low} and {high}, got {number}")
    return number


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = _raw(env, name) or default
    if value not in choices:
        raise InputError(name, f"must be one of {', '.join(choices)}; got {value!r}")
    return value


def _json(env: Mapping[str, str], name: str) -> Any:
    value = _raw(env, name)
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise InputError(
            name, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def _applications(env: Mapping[str, str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The `applications` input: a JSON array of objects (or of command strings)."""
    parsed = _json(env, "applications")
    if parsed is None:
        raise InputError("applications", 'required: a JSON array such as [{"command": "./bin/app"}]')
    if isinstance(parsed, dict | str):
        parsed = [parsed]
    if not isinstance(parsed, list) or not parsed:
        raise InputError("applications", "expected a non-empty JSON array of applications")
    apps: list[dict[str, Any]] = []
    notes: list[str] = []
    for index, entry in enumerate(parsed):
        where = f"applications[{index}]"
        if isinstance(entry, str):
            entry = {"command": entry}
        if not isinstance(entry, dict):
            raise InputError("applications", f"{where} must be an object with a 'command', got {entry!r}")
        unknown = sorted(set(entry) - set(APPLICATION_KEYS))
        if unknown:
            raise InputError(
                "applications",
                f"{where} has unknown key(s) {', '.join(unknown)}; known: {', '.join(APPLICATION_KEYS)}",
            )
        if "command" not in entry:
            raise InputError("applications", f"{where} has no 'command'")
        app = dict(entry)
        if "build_script" in app:
            script = app.pop("build_script")
            if "build_command" in app and app["build_command"] != script:
                raise InputError("applications", f"{where}: give build_command or build_script, not both")
            app["build_command"] = script
        if app.pop("output_json", None) is not None:
            notes.append(f"{where}.output_json is ignored: the report is the step's 'report' output")
        apps.append(app)
    return apps, notes


def _project_directory(env: Mapping[str, str], apps: list[dict[str, Any]]) -> str | None:
    """A job has one project directory: per-application ones must agree with it (and each other)."""
    given = _raw(env, "project_directory")
    per_app = {app.pop("project_directory") for app in apps if "project_directory" in app}
    if not per_app:
        return given
    if len(per_app) > 1 or (given is not None and per_app != {given}):
        raise InputError(
            "applications",
            "applications with different project_directory values need one job each: use one step per "
            f"project directory (got {sorted(str(p) for p in per_app | {given} if p is not None)})",
        )
    return str(next(iter(per_app)))


def read_inputs(env: Mapping[str, str]) -> ActionInputs:
    """Every input, checked; raises InputError naming the first bad one."""
    service_url = _raw(env, "service_url")
    if service_url is None:
        raise InputError(
            "service_url", "required: the IntelliPerf service, e.g. https://intelliperf.example.com"
        )
    if not re.match(r"^https?://[^/\s]+", service_url):
        raise InputError("service_url", f"expected an http(s) URL, got {service_url!r}")
    apps, notes = _applications(env)
    project_directory = _project_directory(env, apps)
    overrides = _json(env, "spec")
    if overrides is not None and not isinstance(overrides, dict):
        raise InputError("spec", "expected a JSON object of job spec fields")
    labels = _raw(env, "pr_labels")
    key = _raw(env, "idempotency_key")
    if key is not None and not re.fullmatch(r"[\x21-\x7e]{1,200}", key):
        raise InputError("idempotency_key", "1 to 200 printable ASCII characters without spaces")
    timeout = _raw(env, "timeout_minutes")
    try:
        timeout_minutes = float(timeout) if timeout is not None else 300.0
    except ValueError:
        raise InputError("timeout_minutes", f"expected a number of minutes, got {timeout!r}") from None
    if not 0 < timeout_minutes <= 7 * 24 * 60:
        raise InputError("timeout_minutes", f"must be more than 0 and at most a week, got {timeout}")
    min_effect = _raw(env, "min_effect")
    try:
        effect = float(min_effect) if min_effect is not None else None
    except ValueError:
        raise InputError("min_effect", f"expected a share such as 0.03, got {min_effect!r}") from None
    if effect is not None and not 0 <= effect <= 1:
        raise InputError("min_effect", f"a share between 0 and 1 (0.03: 3%), got {min_effect}")
    return ActionInputs(
        service_url=service_url.rstrip("/"),
        service_token=_raw(env, "service_token"),
        applications=apps,
        formula=_raw(env, "formula"),
        build_command=_raw(env, "build_command"),
        instrument_command=_raw(env, "instrument_command"),
        project_directory=project_directory,
        kernel=_raw(env, "kernel"),
        top_n=_int(env, "top_n", 1, 100),
        num_attempts=_int(env, "num_attempts", 1, 50),
        unittest_command=_raw(env, "unittest_command"),
        docker_image=_raw(env, "docker_image"),
        gpu_vendor=_raw(env, "gpu_vendor"),
        gpu_arch=_raw(env, "gpu_arch"),
        model=_raw(env, "model"),
        provider=_raw(env, "provider"),
        api_base=_raw(env, "api_base"),
        create_pr=_bool(env, "create_pr", None),
        pr_labels=[x.strip() for x in labels.split(",") if x.strip()] if labels else None,
        llm_gateway_key=_raw(env, "llm_gateway_key"),
        github_token=_raw(env, "intelliperf_actions_token"),
        spec_overrides=overrides or {},
        source=_choice(env, "source", ("archive", "git"), "archive"),  # type: ignore[arg-type]
        wait=bool(_bool(env, "wait", True)),
        timeout_minutes=timeout_minutes,
        fail_on=_choice(env, "fail_on", ("never", "error", "no-speedup", "regression"), "error"),  # type: ignore[arg-type]
        priority=_int(env, "priority", 0, 9),
        report_file=_raw(env, "report_file") or "intelliperf-report.json",
        idempotency_key=key,
        mode=_choice(env, "mode", ("optimize", "track"), "optimize"),  # type: ignore[arg-type]
        base_branch=_raw(env, "base_branch"),
        min_effect=effect,
        warnings=tuple(notes),
    )


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _given(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def build_spec(inputs: ActionInputs, github: GithubContext) -> JobSpec:
    """The job spec: the `spec` input first, the named inputs over it, and the run's commit."""
    named: dict[str, Any] = _given(
        applications=inputs.applications,
        formula=inputs.formula,
        build_command=inputs.build_command,
        instrument_command=inputs.instrument_command,
        project_directory=inputs.project_directory,
        kernel=inputs.kernel,
        top_n=inputs.top_n,
        num_attempts=inputs.num_attempts,
        unittest_command=inputs.unittest_command,
    )
    nested = {
        "container": _given(image=inputs.docker_image),
        "gpu": _given(vendor=inputs.gpu_vendor, arch=inputs.gpu_arch),
        "llm": _given(model=inputs.model, provider=inputs.provider, api_base=inputs.api_base),
        "pull_request": _given(create_pr=inputs.create_pr, labels=inputs.pr_labels),
    }
    named |= {key: value for key, value in nested.items() if value}
    if inputs.mode == "track":
        if inputs.formula not in (None, "diagnoseOnly"):
            raise InputError(
                "formula", f"mode 'track' measures and diagnoses only; leave it unset, not {inputs.formula!r}"
            )
        named["formula"] = "diagnoseOnly"
        named["track"] = _given(
            base_branch=inputs.base_branch or github.base_ref or "main", min_effect=inputs.min_effect
        )
    if inputs.source == "git" and (not github.repository or not github.sha):
        raise InputError("source", "'git' needs GITHUB_REPOSITORY and GITHUB_SHA (set on every runner)")
    if github.repository and github.sha:
        # with an archive too: the service checks the token's repository scope against it, and the
        # pull request is based on this commit (the worker builds from the archive)
        named["repository"] = _given(
            url=f"{github.server_url}/{github.repository}.git",
            ref=github.head_ref or github.ref_name,
            commit=github.sha,
        )
    data = _merge(inputs.spec_overrides, named)
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise _input_error([str(part) for part in err["loc"]], plain_message(err["msg"])) from None
    problems = spec_problems(data)
    if problems:
        where, message = problems[0]
        raise _input_error([str(part) for part in where], message)
    return spec


def _input_error(loc: list[str], message: str) -> InputError:
    """The error of the Action input that set the spec field at ``loc``."""
    name = _INPUT_OF_FIELD.get(loc[0], "spec") if loc else "spec"
    if loc and loc[0] == "repository":
        name = "source"
    if loc[:1] == ["llm"] and len(loc) > 1 and loc[1] in ("model", "provider", "api_base"):
        name = loc[1]
    if loc[:1] == ["pull_request"] and len(loc) > 1 and loc[1] in ("create_pr", "labels"):
        name = "create_pr" if loc[1] == "create_pr" else "pr_labels"
    if loc[:1] == ["gpu"] and len(loc) > 1:
        name = f"gpu_{loc[1]}"
    where = ".".join(loc)
    if loc[:1] == ["applications"] and len(loc) > 1:
        where = f"applications[{loc[1]}]" + "".join(f".{p}" for p in loc[2:])
    return InputError(name, f"{where}: {message}")


def idempotency_key(inputs: ActionInputs, github: GithubContext, spec: JobSpec) -> str | None:
    """One key per run attempt, job, step and spec: a retried POST finds the job it made, a re-run
    of the workflow (a new attempt) makes a new one. None outside a runner (no GITHUB_RUN_ID)."""
    if inputs.idempotency_key:
        return inputs.idempotency_key
    if not github.run_id:
        return None
    digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]
    parts = [github.repository or "-", github.run_id, github.run_attempt or "1", github.job or "-"]
    parts += [github.action or "-", digest]
    key = "gha:" + ":".join(re.sub(r"[^\x21-\x7e]", "_", p) for p in parts)
    if len(key) > 200:
        key = "gha:" + hashlib.sha256(key.encode()).hexdigest()
    return key
