"""`intelliperf mcp` as a coding agent meets it: the MCP SDK's own client, over stdio (the server started as
`python -m intelliperf mcp`, as an MCP client configuration starts it) and over streamable HTTP; the
diagnoses are of the profile of examples/transpose_bank recorded on the GPU machine, so no GPU is needed;
`read_job` reads a job that a real service and a real Celery worker ran."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, TypeAdapter

from accordo.validate import ValidationOptions
from formulas.registry import all_formulas, names
from intelliperf.contract import JobSpec, Report, ValidationResult
from intelliperf.mcp_tools import (
    FormulaList,
    KernelHistory,
    KernelHistoryRequest,
    ReplayRequest,
    ServiceJob,
    ServiceJobRequest,
    ValidateRequest,
)
from tests.intelliperf.test_layering import ENGINE_PARTS, imported_modules
from tests.service.conftest import (
    ADMIN,
    WORKER_TOKEN,
    celery_worker,
    recorded_example_archive,
    serve,
    wait_for,
)
from tests.support.parallel import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "transpose_bank"
RECORDING = ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original"
KERNEL = "_Z15transpose_tiledPKfPfii"  # transpose_tiled(float const*, float*, int, int)
HOT_CODE = "float v = tile[threadIdx.x][threadIdx.y + j];"
TRANSPOSE = {"project_directory": str(EXAMPLE), "applications": [{"command": "./bin/transpose"}]}

T = TypeVar("T")


def server_env(**extra: str) -> dict[str, str]:
    """The server's environment on top of the SDK's default (HOME, PATH, ...): a PATH without nvidia-smi, so
    that the server sees no GPU even on a GPU machine."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    path = os.pathsep.join(f for f in folders if f and shutil.which("nvidia-smi", path=f) is None)
    return {"PATH": path} | extra


def over_stdio(work: Callable[[Client], Awaitable[T]], **env: str) -> T:
    """``work`` in a session with `python -m intelliperf mcp`, started by the SDK's stdio client."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "intelliperf", "mcp"], cwd=ROOT, env=server_env(**env)
    )

    async def session() -> T:
        async with Client(server) as client:
            return await work(client)

    return anyio.run(session)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    # the text block carries the same JSON, for clients that read text only (the spec's advice)
    assert json.loads(text_of(result)) == result.structured_content
    return dict(result.structured_content)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def assert_transpose_diagnosed(report: Report) -> None:
    """What the GPU machine's profile shows: one bottleneck, bank conflicts in the tiled transpose, on the
    line that reads the shared tile column-wise."""
    assert [(d.kernel, d.formula) for d in report.bottlenecks] == [(KERNEL, "bankConflict")]
    found = report.bottlenecks[0]
    assert found.severity == "high" and found.decided
    assert [(loc.file, loc.line) for loc in found.locations] == [("transpose.cu", 59)]
    hot = [line for line in found.locations[0].code if line.hot]
    assert [line.line for line in hot] == [59] and HOT_CODE in hot[0].text
    assert report.kernels[0].name == KERNEL and report.kernels[0].rank == 1
    assert report.device is not None and report.device.name == "NVIDIA H200"  # as recorded
    assert report.formula_requested == "diagnoseOnly" and report.optimization is None


def test_each_tools_input_schema_is_its_model_and_its_output_the_contract() -> None:
    async def work(client: Client) -> dict[str, Any]:
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = over_stdio(work)
    inputs: dict[str, type[BaseModel]] = {
        "diagnose": JobSpec,
        "replay": ReplayRequest,
        "validate": ValidateRequest,
        "read_job": ServiceJobRequest,
        "kernel_history": KernelHistoryRequest,
    }
    outputs: dict[str, type[BaseModel]] = {
        "diagnose": Report,
        "replay": Report,
        "validate": ValidationResult,
        "list_formulas": FormulaList,
        "read_job": ServiceJob,
        "kernel_history": KernelHistory,
    }
    assert set(tools) == set(outputs)
    for name, model in inputs.items():
        assert tools[name].input_schema == model.model_json_schema(), name
    assert tools["list_formulas"].input_schema["properties"] == {}
    for name, model in outputs.items():
        assert tools[name].output_schema == model.model_json_schema(), name
    # what `intelliperf validate` is given: Accordo's own options, every one of them (and no other)
    options = tools["validate"].input_schema["$defs"]["ValidationOptions"]
    assert options == TypeAdapter(ValidationOptions).json_schema() | {"additionalProperties": False}
    assert tools["replay"].input_schema["properties"]["spec"] == {
        "$ref": "#/$defs/JobSpec",
        "description": ReplayRequest.model_fields["spec"].description,
    }
    assert tools["read_job"].annotations.read_only_hint and tools["read_job"].annotations.open_world_hint
    assert tools["diagnose"].annotations.read_only_hint is False  # it builds and runs the application


def test_formulas_are_listed_from_the_registry() -> None:
    async def work(client: Client) -> CallToolResult:
        return await client.call_tool("list_formulas", {})

    listed = FormulaList.model_validate(structured(over_stdio(work)))
    assert [f.name for f in listed.formulas] == names()
    assert listed.meta_formulas == ["auto", "diagnoseOnly"]
    bank = next(f for f in listed.formulas if f.name == "bankConflict")
    assert bank.metrics == [str(m) for m in all_formulas()["bankConflict"].metrics]
    assert bank.title == "Shared-memory bank conflicts"
    assert bank.description.startswith("Shared-memory bank conflicts: a warp's shared access split")


def test_replay_diagnoses_the_recorded_profile_and_reports_progress() -> None:
    messages: list[str | None] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async def work(client: Client) -> CallToolResult:
        request = {"recording": str(RECORDING), "spec": TRANSPOSE}
        return await client.call_tool("replay", request, progress_callback=progress)

    assert_transpose_diagnosed(Report.model_validate(structured(over_stdio(work))))
    assert "timing done: 2 kernels, 2001 launches" in messages
    assert messages[-1] == "diagnose done: 1 bottleneck(s) found"


def test_diagnose_reads_the_specs_replay_folder_and_never_optimizes(tmp_path: Path) -> None:
    """A project with its recording inside (`replay`, as a job posted to the service has it). A formula
    that would start the optimization loop in `intelliperf run` (and ask for an LLM key) only diagnoses."""
    project = tmp_path / "transpose"
    shutil.copytree(EXAMPLE, project)
    shutil.copytree(RECORDING, project / "profile")
    spec = TRANSPOSE | {"project_directory": str(project), "replay": "profile", "formula": "bankConflict"}

    async def work(client: Client) -> CallToolResult:
        return await client.call_tool("diagnose", spec)

    report = Report.model_validate(structured(over_stdio(work)))
    assert_transpose_diagnosed(report)
    assert report.project_directory == str(project)


def test_bad_arguments_come_back_as_tool_errors_naming_what_is_wrong(tmp_path: Path) -> None:
    async def work(client: Client) -> list[CallToolResult]:
        return [
            await client.call_tool("diagnose", TRANSPOSE | {"formula": "noSuchFormula"}),
            await client.call_tool("diagnose", TRANSPOSE | {"project_directory": str(tmp_path / "nowhere")}),
            await client.call_tool("replay", {"recording": str(tmp_path), "spec": TRANSPOSE}),
            await client.call_tool(
                "replay", {"recording": str(RECORDING), "spec": TRANSPOSE | {"replay": "profile"}}
            ),
        ]

    unknown, no_project, no_recording, twice = over_stdio(work)
    assert all(result.is_error for result in (unknown, no_project, no_recording, twice))
    assert "unknown formula 'noSuchFormula'" in text_of(unknown) and "bankConflict" in text_of(unknown)
    assert f"project_directory {str(tmp_path / 'nowhere')!r} is not a folder" in text_of(no_project)
    assert "`intelliperf` would exit 2" in text_of(no_project)
    assert "replay: " in text_of(no_recording) and "not a recorded profile" in text_of(no_recording)
    assert "give the recording once" in text_of(twice)


def test_live_runs_without_a_gpu_are_error_results_that_say_so() -> None:
    async def work(client: Client) -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        request = {"kernel": "block_sum", "reference": "bin/ref", "candidate": "bin/fixed_good"}
        cases = str(ROOT / "examples" / "accordo_cases")
        no_gpu = await client.call_tool("validate", request | {"cwd": cases})
        bad = await client.call_tool("validate", request | {"options": {"alpha": 0.9}})
        live = await client.call_tool("diagnose", TRANSPOSE)
        return no_gpu, bad, live

    no_gpu, bad, live = over_stdio(work)
    for result in (no_gpu, live):
        assert result.is_error and result.structured_content is None
        assert "no NVIDIA GPU" in text_of(result)
        assert "hint: run on a machine with an NVIDIA GPU" in text_of(result)
        assert "NoGpuError: `intelliperf` would exit 3" in text_of(result)
    # Accordo's own checks of its options, before anything runs
    assert bad.is_error and "alpha must be between 0 and 0.5" in text_of(bad)


@contextmanager
def http_server(port: int) -> Iterator[subprocess.Popen[bytes]]:
    argv = [sys.executable, "-m", "intelliperf", "mcp", "--http", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(argv, cwd=ROOT, env=os.environ | server_env(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the MCP server did not listen in 30 s"
            time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def test_streamable_http_serves_the_same_tools() -> None:
    port = free_port()

    async def work() -> tuple[list[str], CallToolResult]:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            request = {"recording": str(RECORDING), "spec": TRANSPOSE}
            return listed, await client.call_tool("replay", request)

    with http_server(port):
        listed, result = anyio.run(work)
    assert listed == ["diagnose", "replay", "validate", "list_formulas", "read_job", "kernel_history"]
    assert_transpose_diagnosed(Report.model_validate(structured(result)))


def test_http_refuses_a_network_address() -> None:
    """The tools run the commands they are given, and the transport has no authentication."""
    argv = [sys.executable, "-m", "intelliperf", "mcp", "--http", "--host", "0.0.0.0", "--port", "1"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--host 0.0.0.0: the MCP server listens on loopback addresses only" in done.stderr


def test_the_cli_runs_without_the_sdk_and_mcp_says_how_to_install_it() -> None:
    code = """
import sys

class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith(("mcp.", "mcp_types")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

import intelliperf.cli as cli
cli.full_app()
assert not [m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")], "imported with the CLI"
assert "accordo.validate" not in sys.modules, "the command costs other commands Accordo's import"
sys.meta_path.insert(0, NoMcp())
sys.argv = ["intelliperf", "mcp"]
cli.main()
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr  # ToolMissingError, as for a missing nvdisasm
    assert "`intelliperf mcp` needs the MCP SDK (mcp>=2.3,<3)" in done.stderr
    assert "pip install 'intelliperf[mcp]'" in done.stderr


def test_the_tools_drive_the_engine_only_through_run_spec() -> None:
    imported = imported_modules(ROOT / "intelliperf" / "mcp_tools.py")
    assert "intelliperf.engine.entry" in imported
    assert not imported & set(ENGINE_PARTS)


def test_read_job_reads_a_job_and_its_report_from_a_live_service(tmp_path: Path) -> None:
    """A real service (SQLite, the filesystem broker) and a real Celery worker run a replay job submitted
    through the API; the MCP server reads it with the URL and token of its environment, as configured."""
    from service.settings import ServiceSettings

    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'intelliperf.db'}",
        admin_token=ADMIN,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
        heartbeat_s=0.5,
        worker_stale_s=3.0,
        dispatch_sweep_s=0.5,
        events_poll_s=0.05,
    )
    spec = {"applications": [{"command": "./bin/transpose"}], "formula": "diagnoseOnly", "replay": "profile"}
    with (
        serve(settings) as live,
        celery_worker(settings, "w-mcp", tmp_path / "worker.log"),
        live.client() as client,
    ):
        response = client.post(
            "/v1/jobs",
            data={"spec": json.dumps(spec)},
            files={"archive": ("project.tar.gz", recorded_example_archive(), "application/gzip")},
        )
        assert response.status_code == 201, response.text
        job_id = str(response.json()["id"])
        wait_for(lambda: client.get(f"/v1/jobs/{job_id}").json()["status"] in ("succeeded", "failed"), 90)
        served = client.get(f"/v1/jobs/{job_id}/report").json()

        async def work(mcp: Client) -> list[CallToolResult]:
            return [
                await mcp.call_tool("read_job", {"job_id": job_id}),
                await mcp.call_tool("read_job", {"job_id": job_id, "report": False}),
                await mcp.call_tool("read_job", {"job_id": job_id, "token": "not-the-token"}),
                await mcp.call_tool("read_job", {"job_id": "0" * 32}),
                await mcp.call_tool("read_job", {"job_id": "../workers"}),
            ]

        read, without_report, refused, unknown, traversal = over_stdio(
            work, INTELLIPERF_SERVICE_URL=live.url, INTELLIPERF_TOKEN=ADMIN
        )

    found = ServiceJob.model_validate(structured(read))
    assert found.job["id"] == job_id and found.job["status"] == "succeeded", found.job
    assert found.job["outcome"] == "diagnosed" and found.job["worker"] == "w-mcp"
    assert found.report == Report.model_validate(served)
    assert found.report is not None
    assert [(d.kernel, d.formula) for d in found.report.bottlenecks] == [(KERNEL, "bankConflict")]
    assert [(loc.file, loc.line) for loc in found.report.bottlenecks[0].locations] == [("transpose.cu", 59)]
    assert ServiceJob.model_validate(structured(without_report)).report is None
    assert refused.is_error and "HTTP 401" in text_of(refused) and "SubmitError" in text_of(refused)
    assert "not-the-token" not in text_of(refused)
    assert unknown.is_error and "HTTP 404" in text_of(unknown)
    assert traversal.is_error and "job_id" in text_of(traversal)  # refused before any request is made


def test_kernel_history_reads_a_series_and_its_change_point_from_a_live_service(tmp_path: Path) -> None:
    """Twenty jobs of ten commits recorded by a real service (SQLite): the tool reads the kernel's series
    with the URL and token of its environment, and the change point at the sixth commit."""
    from service.db.session import Database
    from service.settings import ServiceSettings
    from tests.service.test_kernel_series import H100, TRANSPOSE, history_with_a_step

    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'intelliperf.db'}",
        admin_token=ADMIN,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
    )
    with serve(settings) as live:
        db = Database(settings.resolved_database_url)
        try:
            history_with_a_step(db)
        finally:
            db.dispose()
        query = {"repository": "acme/kernels", "kernel": TRANSPOSE}

        async def work(mcp: Client) -> list[CallToolResult]:
            return [
                await mcp.call_tool("kernel_history", {**query, "device": H100, "ref": "main"}),
                await mcp.call_tool("kernel_history", {**query, "kernel": "_Z4nonev"}),
                await mcp.call_tool("kernel_history", {**query, "repository": "not a repository"}),
            ]

        found, unknown, bad = over_stdio(work, INTELLIPERF_SERVICE_URL=live.url, INTELLIPERF_TOKEN=ADMIN)
    history = KernelHistory.model_validate(structured(found))
    assert history.total == 20 and len(history.samples) == 20
    assert all("launch_ns" not in sample for sample in history.samples)  # the spread stays in the API
    assert [c.commit for c in history.change_points] == [f"{5:07x}"] and history.change_points_note is None
    assert unknown.is_error and "HTTP 404" in text_of(unknown)
    assert bad.is_error and "repository" in text_of(bad)
