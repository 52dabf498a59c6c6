"""The AMD probe: `amd-smi static --json` (ROCm 6.3 and later give the gfx target there), else, when
amd-smi is missing or lists no usable GPU, `rocm-smi --json` (ROCm 6.1.1 and later).

Both name each GPU by the index the tool gives it. A GPU without a market name or a gfx target of the
known shape (gfx90a, gfx942, gfx1100) is left out: the worker's queue is chosen by it, so it is never
guessed. (Some amd-smi releases write gfx90a as "gfx9010": that is left out too, and rocm-smi asked.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from intelliperf.gpu.smi import GpuInfo, Scan, first_json, run_tool

__all__ = ["AMD_SMI_ARGS", "ROCM_SMI_ARGS", "parse_amd_smi", "parse_rocm_smi", "scan_amd"]

AMD_SMI_ARGS = ("static", "--asic", "--vram", "--driver", "--json")
ROCM_SMI_ARGS = ("--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json")

ARCH = re.compile(r"gfx(?:[6-9][0-9a-f]{2}|1[0-9]{2}[0-9a-f])")
CARD = re.compile(r"card(\d+)")
SIZE = re.compile(r"(\d+)\s*([KMG]?B)")
UNIT = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30}  # amd-smi's MB is the library's bytes / 1024²


def scan_amd() -> Scan:
    amd_smi = _scan("amd-smi", AMD_SMI_ARGS, parse_amd_smi)
    if amd_smi is not None and amd_smi.gpus:
        return amd_smi
    rocm_smi = _scan("rocm-smi", ROCM_SMI_ARGS, parse_rocm_smi)
    if rocm_smi is None:
        return amd_smi or Scan(problem="no AMD GPU: neither amd-smi nor rocm-smi is installed")
    if amd_smi is None or rocm_smi.gpus:
        return rocm_smi
    tails = [scan.log_tail for scan in (amd_smi, rocm_smi) if scan.log_tail]
    return Scan(problem=f"{amd_smi.problem}; {rocm_smi.problem}", log_tail="\n".join(tails) or None)


def _scan(tool: str, args: tuple[str, ...], parse: Callable[[str], Scan]) -> Scan | None:
    output = run_tool(tool, *args, label="AMD")
    return output if output is None or isinstance(output, Scan) else parse(output)


def parse_amd_smi(text: str) -> Scan:
    """Parse `amd-smi static --asic --vram --driver --json`: a list of {"gpu": 0, "asic": {...}, "vram":
    {...}, "driver": {...}}, which amd-smi 26 (ROCm 7) wraps as {"gpu_data": [...]}."""
    data = first_json(text)
    if isinstance(data, dict):
        data = data.get("gpu_data")
    if not isinstance(data, list):
        return Scan(problem=f"unexpected amd-smi output: {_head(text)!r}")
    entries = [entry for entry in data if isinstance(entry, dict) and "gpu" in entry]
    if not entries:
        return Scan(problem="amd-smi lists no GPU")
    parsed = [(entry["gpu"], _amd_smi_gpu(entry)) for entry in entries]
    return _found(parsed, "amd-smi gives no market name and gfx target for GPU {}")


def _amd_smi_gpu(entry: dict[str, Any]) -> GpuInfo | None:
    index, asic = entry.get("gpu"), _dict(entry.get("asic"))
    name, arch = _text(asic.get("market_name")), _arch(asic.get("target_graphics_version"))
    if type(index) is not int or name is None or arch is None:
        return None
    driver = _text(_dict(entry.get("driver")).get("version"))
    units = asic.get("num_compute_units")
    compute_units = units if isinstance(units, int) and units > 0 else None
    return GpuInfo(index, "amd", name, arch, _vram_bytes(_dict(entry.get("vram"))), driver, compute_units)


def _vram_bytes(vram: dict[str, Any]) -> int | None:
    size = vram.get("size")
    if isinstance(size, dict):  # {"value": 196592, "unit": "MB"} (amd-smi 24.5, ROCm 6.1, and later)
        value, unit = size.get("value"), size.get("unit")
        return value * UNIT[unit] if type(value) is int and unit in UNIT else None
    if isinstance(size, str) and (match := SIZE.fullmatch(size.strip())):
        return int(match[1]) * UNIT[match[2]]
    megabytes = vram.get("vram_size_mb")  # ROCm 6.0
    return megabytes * 2**20 if type(megabytes) is int else None


def parse_rocm_smi(text: str) -> Scan:
    """Parse `rocm-smi --showproductname --showmeminfo vram --showdriverversion --json`: {"card0": {"Card
    Series": ..., "GFX Version": "gfx942", "VRAM Total Memory (B)": "..."}, "system": {"Driver version":
    ...}}, every value a string."""
    data = first_json(text)
    if not isinstance(data, dict):
        return Scan(problem=f"unexpected rocm-smi output: {_head(text)!r}")
    driver = _text(_dict(data.get("system")).get("Driver version"))
    cards = {int(match[1]): _dict(value) for key, value in data.items() if (match := CARD.fullmatch(key))}
    if not cards:
        return Scan(problem="rocm-smi lists no GPU")
    parsed = [(index, _rocm_smi_gpu(index, card, driver)) for index, card in cards.items()]
    return _found(parsed, "rocm-smi gives no card series and GFX version for GPU {}")


def _rocm_smi_gpu(index: int, card: dict[str, Any], driver: str | None) -> GpuInfo | None:
    name, arch = _text(card.get("Card Series")), _arch(card.get("GFX Version"))
    if name is None or arch is None:
        return None
    total = _text(card.get("VRAM Total Memory (B)"))
    return GpuInfo(index, "amd", name, arch, int(total) if total and total.isdigit() else None, driver)


def _found(parsed: list[tuple[object, GpuInfo | None]], left_out: str) -> Scan:
    """The GPUs parsed; the first one left out, if any, named in the problem."""
    missing = [index for index, gpu in parsed if gpu is None]
    problem = left_out.format(missing[0]) if missing else None
    return Scan(tuple(gpu for _, gpu in parsed if gpu is not None), problem=problem)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    if not isinstance(value, str) or value.strip() in ("", "N/A"):
        return None
    return value.strip()


def _arch(value: object) -> str | None:
    text = _text(value)
    return text if text and ARCH.fullmatch(text) else None


def _head(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:120] if lines else ""
