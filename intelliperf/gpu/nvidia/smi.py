"""The NVIDIA probe: one `nvidia-smi --query-gpu` call, parsed into the GPUs it lists."""

from __future__ import annotations

from intelliperf.gpu.smi import GpuInfo, Scan, run_tool

__all__ = ["QUERY", "parse_query", "scan_nvidia"]

QUERY = "index,name,compute_cap,memory.total,driver_version"


def scan_nvidia() -> Scan:
    output = run_tool("nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", label="NVIDIA")
    if output is None:
        return Scan(problem="no NVIDIA GPU: nvidia-smi is not installed")
    if isinstance(output, Scan):
        return output
    return parse_query(output)


def parse_query(text: str) -> Scan:
    """Parse `nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits`: a line a GPU; a line that
    does not parse leaves its GPU out."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return Scan(problem="nvidia-smi lists no GPU")
    parsed = [(line, _gpu(line)) for line in lines]
    gpus = tuple(gpu for _, gpu in parsed if gpu is not None)
    bad = [line for line, gpu in parsed if gpu is None]
    return Scan(gpus, problem=f"unexpected nvidia-smi output: {bad[0]!r}" if bad else None)


def _gpu(line: str) -> GpuInfo | None:
    fields = [field.strip() for field in line.split(",")]
    if len(fields) < 5:
        return None
    index, capability, memory_mib, driver = fields[0], *fields[-3:]
    name = ", ".join(fields[1:-3])
    major, dot, minor = capability.partition(".")
    if not (index.isdigit() and dot and major.isdigit() and minor.isdigit() and name):
        return None
    try:
        memory = int(float(memory_mib) * 2**20)
    except (ValueError, OverflowError):  # [N/A]
        memory = None
    known = driver and not driver.startswith("[")  # [N/A], [Not Supported]
    return GpuInfo(int(index), "nvidia", name, f"sm_{major}{minor}", memory, driver if known else None)
