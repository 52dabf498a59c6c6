"""`intelliperf mcp`: IntelliPerf's operations as Model Context Protocol tools, for coding agents.

Over stdio (an MCP client starts `intelliperf mcp`) or streamable HTTP on a loopback address
(`intelliperf mcp --http --port N`, at http://127.0.0.1:N/mcp). The tools and their models are in
intelliperf.mcp_tools; this module adapts them to the MCP SDK and is the command. The SDK (the ``mcp``
extra) is imported only when the server starts, so the rest of the CLI runs without it, and so is
everything the tools need (Accordo, the engine), so the command costs other commands nothing.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from intelliperf import __version__
from intelliperf.errors import IntelliPerfError, SpecError, ToolMissingError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

__all__ = ["DEFAULT_PORT", "HTTP_PATH", "MCP_REQUIREMENT", "build_server", "register"]

MCP_REQUIREMENT = "mcp>=2.3,<3"
DEFAULT_PORT = 8766
HTTP_PATH = "/mcp"

INSTRUCTIONS = """IntelliPerf finds the GPU kernel that costs the most time, says why it is slow and on which
source lines, and judges a rewrite. Typical flow: `diagnose` (or `replay` a recorded profile: no GPU
needed) -> in the report, read diagnoses[] where present is true: formula, summary, and locations[] (file,
line, code: the hot lines) -> rewrite the kernel in a copy of the program -> `validate` the candidate
against the reference (correct launch by launch, then the speedup with a 95% interval). `list_formulas`
names the bottlenecks IntelliPerf knows; `read_job` reads a job of an IntelliPerf service. Live runs need
an NVIDIA GPU on the machine this server runs on; paths are paths on that machine."""


def _import_sdk() -> None:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = f"mcp {version('mcp')} is installed"
        except PackageNotFoundError:
            found = "it is not installed"
        raise ToolMissingError(
            f"`intelliperf mcp` needs the MCP SDK ({MCP_REQUIREMENT}): {found} ({exc})",
            hint="pip install 'intelliperf[mcp]' (in a checkout: pip install '.[mcp]')",
        ) from None


def _tools() -> list[Tool]:
    """Each tool's arguments are one model, whose JSON Schema is the tool's input schema, validated as one
    instance of it. (From a signature the SDK would make a schema of one property per Python parameter: the
    JobSpec one level down, behind a reference.)"""
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
    from mcp_types import ToolAnnotations
    from pydantic import BaseModel, create_model, model_validator

    from intelliperf.mcp_tools import DESCRIPTIONS, TOOLS

    class WholeArguments(ArgModelBase):
        """The call's arguments as the one field ``request``, which the tool's function takes."""

        @model_validator(mode="before")
        @classmethod
        def _whole(cls, data: object) -> object:
            return {"request": data}

    def tool(fn: Any, request: type[BaseModel] | None, hints: dict[str, bool]) -> Tool:
        made = Tool.from_function(
            fn,
            name=fn.__name__,
            description=DESCRIPTIONS[fn.__name__],
            context_kwarg="ctx" if request is not None else None,
            annotations=ToolAnnotations.model_validate(hints),
            structured_output=True,
        )
        if request is not None:
            made.fn_metadata.arg_model = create_model(
                f"{fn.__name__}Arguments", __base__=WholeArguments, request=(request, ...)
            )
            made.parameters = request.model_json_schema()
        return made

    return [tool(fn, request, hints) for fn, request, hints in TOOLS]


def build_server() -> MCPServer[Any]:
    """The MCP server with its tools. Raises ToolMissingError without the SDK."""
    _import_sdk()
    from mcp.server.mcpserver import MCPServer

    return MCPServer(
        "intelliperf",
        title="IntelliPerf",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=_tools(),
        log_level="WARNING",
    )


MCP_HELP = """Serve IntelliPerf's operations to coding agents over the Model Context Protocol.

Tools: diagnose (a job spec, as `run -f diagnoseOnly`), replay (a recorded profile: no GPU needed),
validate (as `validate`), list_formulas, read_job (a job of an IntelliPerf service, with
INTELLIPERF_SERVICE_URL and INTELLIPERF_TOKEN). Without --http it speaks stdio (an MCP client starts it);
with --http, streamable HTTP at http://HOST:PORT/mcp. Needs the mcp extra: pip install 'intelliperf[mcp]'.
SKILL.md tells an agent how to use it.
"""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_mcp(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio")] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: a loopback address")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="With --http: its port")
    ] = DEFAULT_PORT,
) -> None:
    from rich.console import Console
    from rich.markup import escape

    stderr = Console(stderr=True, soft_wrap=True)
    try:
        if http and not _loopback(host):
            # The tools run the build and application commands they are given and the transport has no
            # authentication: on a network address, whoever reaches the port runs commands as this user.
            raise SpecError(
                f"--host {host}: the MCP server listens on loopback addresses only (its tools run the "
                "commands they are given, and the transport has no authentication)",
                hint="use 127.0.0.1, and reach it from another machine through an SSH tunnel",
            )
        server = build_server()
    except IntelliPerfError as error:
        stderr.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, markup=True)
        raise typer.Exit(code=error.exit_code) from None
    if not http:
        server.run("stdio")
        return
    stderr.print(f"IntelliPerf MCP server on http://{host}:{port}{HTTP_PATH}", highlight=False)
    sys.stderr.flush()
    server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)


def register(app: typer.Typer) -> None:
    """Add `mcp` to ``app`` (intelliperf.cli.full_app)."""
    app.command(name="mcp", help=MCP_HELP)(serve_mcp)
