"""The GPUs this node has (every vendor's, from intelliperf.gpu.probe), and the queues a worker for each
consumes."""

from __future__ import annotations

from intelliperf.gpu.probe import GpuInfo, probe_gpus

__all__ = ["GpuInfo", "detect_gpus", "queues_for", "visible_devices"]

detect_gpus = probe_gpus

# the variable that shows a process only its GPU; ROCr's rather than HIP's, as worker/container.py sets in
# an AMD job's container (both at once would compound: HIP numbers what ROCr left visible)
VISIBLE_DEVICES = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "ROCR_VISIBLE_DEVICES"}


def queues_for(gpu: GpuInfo | None) -> list[str]:
    """A GPU's own queue (gpu.nvidia.sm90, gpu.amd.gfx942) and its vendor's 'any' queue; without a GPU,
    NVIDIA's 'any' one."""
    if gpu is None:
        return ["gpu.nvidia.any"]
    return [f"gpu.{gpu.vendor}.{gpu.arch.replace('_', '')}", f"gpu.{gpu.vendor}.any"]


def visible_devices(gpu: GpuInfo) -> dict[str, str]:
    """The environment pinning a worker process to ``gpu``."""
    return {VISIBLE_DEVICES[gpu.vendor]: str(gpu.index)}
