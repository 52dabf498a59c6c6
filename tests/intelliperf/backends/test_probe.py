"""The one GPU probe, NVIDIA and AMD: stand-in nvidia-smi, amd-smi and rocm-smi on PATH print what the
real ones print (tests/fixtures/amd/smi/README.md says where the AMD formats come from), each checking
that it was asked the documented question."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from intelliperf.errors import NoGpuError
from intelliperf.gpu import smi
from intelliperf.gpu.device import query_device
from intelliperf.gpu.probe import GpuInfo, Vendor, probe_gpus
from worker.cli import worker_commands
from worker.gpu import detect_gpus, queues_for

AMD = Path(__file__).resolve().parents[2] / "fixtures" / "amd" / "smi"
# the documented questions, spelled out here so that a probe asking another one fails
NVIDIA_SMI_ARGS = (
    "--query-gpu=index,name,compute_cap,memory.total,driver_version",
    "--format=csv,noheader,nounits",
)
AMD_SMI_ARGS = ("static", "--asic", "--vram", "--driver", "--json")
ROCM_SMI_ARGS = ("--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json")
TWO_H100 = (
    "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 550.54.15\n1, NVIDIA H100 80GB HBM3, 9.0, 81559, 550.54.15\n"
)
MIB = 2**20

H100 = GpuInfo(0, "nvidia", "NVIDIA H100 80GB HBM3", "sm_90", 81559 * MIB, "550.54.15")
MI300X = GpuInfo(0, "amd", "AMD Instinct MI300X", "gfx942", 196592 * MIB, "6.8.5", 304)
MI250X = GpuInfo(0, "amd", "AMD Instinct MI250X", "gfx90a", 65520 * MIB, "6.7.0")  # rocm-smi: no CU count


class Node:
    """A PATH holding only the stand-in tools this test puts there."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        monkeypatch.setenv("PATH", str(self.bin))

    def tool(
        self, name: str, args: tuple[str, ...], stdout: str = "", *, code: int = 0, sleep_s: float = 0
    ) -> None:
        script = self.bin / name
        script.write_text(
            f"#!{sys.executable}\nimport sys, time\n"
            f"if sys.argv[1:] != {list(args)!r}:\n"
            "    sys.exit('unexpected arguments: ' + ' '.join(sys.argv[1:]))\n"
            f"time.sleep({sleep_s})\nsys.stdout.write({stdout!r})\n"
            f"sys.stderr.write('this is {name}\\n' if {code} else '')\nsys.exit({code})\n"
        )
        script.chmod(0o755)

    def nvidia_smi(self, stdout: str, *, code: int = 0, sleep_s: float = 0) -> None:
        self.tool("nvidia-smi", NVIDIA_SMI_ARGS, stdout, code=code, sleep_s=sleep_s)

    def amd_smi(self, fixture: str) -> None:
        self.tool("amd-smi", AMD_SMI_ARGS, (AMD / fixture).read_text())

    def rocm_smi(self, fixture: str) -> None:
        self.tool("rocm-smi", ROCM_SMI_ARGS, (AMD / fixture).read_text())


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    return Node(tmp_path, monkeypatch)


def test_two_nvidia_gpus(node: Node) -> None:
    node.nvidia_smi(TWO_H100)
    assert probe_gpus() == [H100, GpuInfo(1, "nvidia", H100.name, "sm_90", 81559 * MIB, "550.54.15")]
    device = query_device(1)
    assert (device.vendor, device.name, device.arch, device.warp_size) == ("nvidia", H100.name, "sm_90", 32)
    assert (device.memory_bytes, device.driver) == (81559 * MIB, "550.54.15")


def test_amd_gpus_from_amd_smi(node: Node) -> None:
    node.amd_smi("amd_smi_static_mi300x.json")
    assert probe_gpus() == [MI300X, GpuInfo(1, "amd", MI300X.name, "gfx942", 196592 * MIB, "6.8.5", 304)]
    assert MI300X.device_info().sm_count == 304 and MI300X.device_info().warp_size == 64
    device = query_device()
    assert (device.vendor, device.name, device.arch, device.warp_size) == ("amd", MI300X.name, "gfx942", 64)
    assert (device.memory_bytes, device.driver) == (196592 * MIB, "6.8.5")


def test_amd_smi_of_rocm_7_wraps_its_list(node: Node) -> None:
    node.amd_smi("amd_smi_static_rocm7_rx7900xtx.json")
    assert probe_gpus() == [
        GpuInfo(0, "amd", "AMD Radeon RX 7900 XTX", "gfx1100", 24560 * MIB, "6.12.12", 96)
    ]


def test_rocm_smi_when_amd_smi_is_missing(node: Node) -> None:
    node.rocm_smi("rocm_smi_mi250x.json")
    assert probe_gpus() == [MI250X, GpuInfo(1, "amd", MI250X.name, "gfx90a", 65520 * MIB, "6.7.0")]


def test_a_gfx_target_of_an_unknown_shape_is_not_guessed_but_asked_of_rocm_smi(node: Node) -> None:
    node.amd_smi("amd_smi_static_mi250x_gfx9010.json")  # gfx90a written as gfx9010
    assert probe_gpus() == []
    node.rocm_smi("rocm_smi_mi250x.json")
    assert probe_gpus()[0] == MI250X


def test_both_vendors_on_one_node(node: Node) -> None:
    node.nvidia_smi(TWO_H100)
    node.amd_smi("amd_smi_static_mi300x.json")
    gpus = probe_gpus()
    assert [(gpu.vendor, gpu.index, gpu.arch) for gpu in gpus] == [
        ("nvidia", 0, "sm_90"),
        ("nvidia", 1, "sm_90"),
        ("amd", 0, "gfx942"),
        ("amd", 1, "gfx942"),
    ]
    assert query_device(vendor="amd").arch == "gfx942" and query_device().arch == "sm_90"
    names = [env["INTELLIPERF_WORKER_NAME"] for _, env in worker_commands(None)]
    assert len(set(names)) == 4  # AMD's GPU 0 is not NVIDIA's GPU 0


def test_garbage_leaves_that_gpu_out(node: Node) -> None:
    node.nvidia_smi(
        "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 550.54.15\nNVIDIA-SMI has failed\n1, x, [N/A], 1, 2\n"
    )
    node.tool("amd-smi", AMD_SMI_ARGS, "amd-smi: not a JSON document\n")
    node.rocm_smi("rocm_smi_garbage.json")
    assert probe_gpus() == [
        H100,
        GpuInfo(1, "amd", "AMD Instinct MI300X", "gfx942", None, "6.8.5"),  # card0 has no GFX version
    ]


def test_no_tools_means_no_gpu(node: Node) -> None:
    assert probe_gpus() == [] and detect_gpus() == []


def test_no_gpu_says_what_was_tried(node: Node) -> None:
    with pytest.raises(NoGpuError) as none:
        query_device()
    assert none.value.exit_code == 3
    assert none.value.message == (
        "no NVIDIA or AMD GPU found:\n"
        "  no NVIDIA GPU: nvidia-smi is not installed\n"
        "  no AMD GPU: neither amd-smi nor rocm-smi is installed"
    )
    assert no_gpu(vendor="nvidia") == "no NVIDIA GPU: nvidia-smi is not installed"
    assert "--replay" in str(none.value.hint)


def no_gpu(index: int = 0, vendor: Vendor | None = None) -> str:
    with pytest.raises(NoGpuError) as error:
        query_device(index, vendor)
    return error.value.message


def test_a_failing_or_unknown_tool_is_named_in_the_error(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    node.nvidia_smi("", code=9)
    with pytest.raises(NoGpuError) as failed:
        query_device(vendor="nvidia")
    assert failed.value.message == "nvidia-smi failed: no usable NVIDIA GPU"
    assert failed.value.log_tail == "this is nvidia-smi"
    node.nvidia_smi("")
    assert no_gpu(vendor="nvidia") == "nvidia-smi lists no GPU"
    node.nvidia_smi("garbage\n")
    assert no_gpu(vendor="nvidia") == "unexpected nvidia-smi output: 'garbage'"
    node.nvidia_smi(TWO_H100)
    assert no_gpu(5, vendor="nvidia") == "no NVIDIA GPU with index 5 (found 0, 1)"
    node.tool("amd-smi", AMD_SMI_ARGS, "[]")
    node.rocm_smi("rocm_smi_garbage.json")
    assert no_gpu(0, vendor="amd") == "no AMD GPU with index 0 (found 1)"
    node.tool("amd-smi", AMD_SMI_ARGS, "[]")
    node.tool("rocm-smi", ROCM_SMI_ARGS, code=1)
    assert no_gpu(vendor="amd") == "amd-smi lists no GPU; rocm-smi failed: no usable AMD GPU"
    monkeypatch.setattr(smi, "TIMEOUT_S", 0.5)
    node.nvidia_smi(TWO_H100, sleep_s=5)
    assert no_gpu(vendor="nvidia") == "nvidia-smi did not answer within 0.5 s"


def test_an_amd_worker_advertises_its_gfx_queue_and_pins_its_gpu(node: Node) -> None:
    node.amd_smi("amd_smi_static_mi300x.json")
    assert queues_for(detect_gpus()[0]) == ["gpu.amd.gfx942", "gpu.amd.any"]
    commands = worker_commands(None)
    assert len(commands) == 2
    for index, (argv, env) in enumerate(commands):
        assert argv[argv.index("-Q") + 1] == "gpu.amd.gfx942,gpu.amd.any"
        assert env["ROCR_VISIBLE_DEVICES"] == env["INTELLIPERF_WORKER_GPU_INDEX"] == str(index)
        assert env["INTELLIPERF_WORKER_GPU_VENDOR"] == "amd" and "CUDA_VISIBLE_DEVICES" not in env
