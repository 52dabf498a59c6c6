"""Run a user's Python program under Proton's instrumentation backend with scopes in one Triton kernel.

    python proton_runner.py OUT KERNEL -- SCRIPT.py [ARGS...]
    python proton_runner.py OUT KERNEL -- -m MODULE [ARGS...]

Runs in the user's interpreter, next to their Triton, so it imports only the standard library and
Triton. The user's files are not edited: the source of the ``@triton.jit`` function named KERNEL is
rewritten in memory before its first compilation (``JITFunction._unsafe_update_src``), with a scope
around the whole body (``kernel``), around each loop (``loop@L<line>``) and around each statement that
loads, stores, runs an atomic or a dot (``<kind>@L<line>``). Proton starts at the kernel's first launch
and writes ``OUT.hatchet``; the first MAX_LAUNCHES launches are instrumented, then the kernel's own source
is restored for the rest of the run. This runner adds ``OUT.json`` with the kernel's instrumented
launches, its warps per program and the regions. A kernel with a loop records into a global-memory
buffer (a loop records on every iteration); others into Proton's default shared-memory buffer.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import runpy
import sys
import textwrap

MAX_LAUNCHES = 5  # launches instrumented: each one synchronizes and is read back on the host
GLOBAL_BUFFER = 1 << 16  # bytes per program: 8192 records of its warps
MEMORY_OPS = {"load": "load", "store": "store", "dot": "dot", "atomic": "atomic"}


def _kind(statement: ast.stmt) -> str | None:
    kinds = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            for prefix, kind in MEMORY_OPS.items():
                if name == prefix or (prefix == "atomic" and name.startswith("atomic_")):
                    kinds.append(kind)
    if not kinds:
        return None
    for kind in ("atomic", "dot", "store", "load"):  # what a line's time goes to, most expensive first
        if kind in kinds:
            return kind
    return kinds[0]


def _call(action: str, name: str) -> ast.stmt:
    return ast.parse(f"_intelliperf_proton.{action}_scope({name!r})").body[0]


def _scoped(body: list[ast.stmt], offset: int, regions: list[dict]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for statement in body:
        line = offset + statement.lineno
        if isinstance(statement, (ast.For, ast.While)):
            statement.body = _scoped(statement.body, offset, regions)
            name = f"loop@L{line}"
            regions.append({"name": name, "kind": "loop", "line": line})
            out += [_call("enter", name), statement, _call("exit", name)]
        elif isinstance(statement, ast.If):
            statement.body = _scoped(statement.body, offset, regions)
            statement.orelse = _scoped(statement.orelse, offset, regions)
            out.append(statement)
        elif not isinstance(statement, ast.Return) and (kind := _kind(statement)) is not None:
            name = f"{kind}@L{line}"
            regions.append({"name": name, "kind": kind, "line": line})
            out += [_call("enter", name), statement, _call("exit", name)]
        else:
            out.append(statement)
    return out


def instrument(source: str, def_line: int) -> tuple[str, list[dict]]:
    """The function's source with scopes, and the regions it holds. ``def_line`` is the line of the
    function's ``def`` in its file; region lines are lines of that file."""
    tree = ast.parse(textwrap.dedent(source))
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    offset = def_line - function.lineno
    regions: list[dict] = []
    body = _scoped(function.body, offset, regions)
    if any(isinstance(node, ast.Return) for node in ast.walk(function)):
        function.body = body  # an early return would leave a whole-body scope open
    else:
        regions.insert(0, {"name": "kernel", "kind": "kernel", "line": def_line})
        function.body = [_call("enter", "kernel"), *body, _call("exit", "kernel")]
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), regions


def def_line_of(function: object) -> int:
    """The line of ``def`` (below any decorators) of a Python function in its file."""
    lines, start = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return start + next(i for i, text in enumerate(lines) if text.lstrip().startswith("def "))


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    split = argv.index("--")
    out, kernel = argv[:split]
    program = argv[split + 1 :]
    if not program:
        sys.stderr.write("proton_runner: no program to run\n")
        return 2

    import triton.profiler as proton
    import triton.profiler.language as pl
    from triton.runtime.jit import JITFunction

    pl.enable_semantic("triton")
    meta: dict = {"kernel": kernel, "regions": [], "launches": 0, "num_warps": [], "instrumented": False}
    original_run = JITFunction.run

    def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.__name__ == kernel and not kwargs.get("warmup"):
            if not meta["instrumented"]:
                meta["source"] = self.src
                source, regions = instrument(self.src, def_line_of(self.fn))
                self._unsafe_update_src(source)
                self.__globals__["_intelliperf_proton"] = pl
                loops = any(r["kind"] == "loop" for r in regions)
                meta.update(instrumented=True, regions=regions, file=self.fn.__code__.co_filename)
                # A loop records on every iteration: more than the shared-memory buffer holds per warp.
                buffer = (
                    proton.mode.Default(buffer_type="global", buffer_size=GLOBAL_BUFFER) if loops else None
                )
                meta["buffer"] = "global" if loops else "shared"
                proton.start(out, backend="instrumentation", mode=buffer)
            if meta["launches"] < MAX_LAUNCHES:
                meta["launches"] += 1
                meta["num_warps"].append(kwargs.get("num_warps", 4))
                launched = original_run(self, *args, **kwargs)
                if meta["launches"] == MAX_LAUNCHES:  # enough: the rest of the run goes uninstrumented
                    proton.deactivate()
                    self._unsafe_update_src(meta.pop("source"))
                return launched
        return original_run(self, *args, **kwargs)

    JITFunction.run = run
    sys.argv = list(program)
    status = 0
    try:
        if program[0] == "-m" and len(program) > 1:
            sys.argv = program[1:]
            runpy.run_module(program[1], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(program[0])))
            runpy.run_path(program[0], run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        if meta["instrumented"]:
            proton.finalize()
        meta.pop("source", None)
        with open(f"{out}.json", "w") as handle:
            json.dump(meta, handle)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
