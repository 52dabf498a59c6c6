#!/usr/bin/env python3
"""silu_loop: y = x * sigmoid(x) (SiLU) over 16M floats, in Triton, as a persistent kernel: one program
per SM steps through the tensor BLOCK elements at a time.

Bottleneck: the launch asks for one warp per program and BLOCK=128, so the whole GPU runs one warp per SM
(1 of its 64 warp slots), and each warp waits for its 512-byte load before the next step: far too few loads
in flight to keep DRAM busy (low occupancy: the grid and its programs are both too small).
Usage: ./silu_loop.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

N = 1 << 24
BLOCK = 128
WARPS = 1


@triton.jit
def silu_loop(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # intelliperf: occupancy
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, x * tl.sigmoid(x), mask=mask)


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    generator = torch.Generator(device="cuda").manual_seed(13)
    x = torch.randn(N, device="cuda", generator=generator)
    y = torch.empty_like(x)
    programs = torch.cuda.get_device_properties(x.device).multi_processor_count
    for _ in range(iterations):
        silu_loop[(programs,)](x, y, N, BLOCK=BLOCK, num_warps=WARPS)
    torch.cuda.synchronize()
    if not torch.allclose(y, torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6):
        sys.exit("self-check failed: y differs from torch.nn.functional.silu(x)")
    print(f"checksum: {y.double().sum().item():.3f} {y[12345].item():.6f}")


if __name__ == "__main__":
    main()
