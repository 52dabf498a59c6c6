#!/usr/bin/env python3
"""silu_loop: y = x * sigmoid(x) (SiLU) over 16M floats, in Triton, with the same grid-stride kernel.

Fixed: four warps per program, BLOCK=1024 and one program per block (16K programs, many waves of the
GPU), so every SM holds its full 64 warps and the loop runs once per program: enough loads in flight to
stream at DRAM speed.
Usage: ./silu_loop_fixed.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

N = 1 << 24
BLOCK = 1024
WARPS = 4


@triton.jit
def silu_loop(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
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
    for _ in range(iterations):
        silu_loop[(triton.cdiv(N, BLOCK),)](x, y, N, BLOCK=BLOCK, num_warps=WARPS)
    torch.cuda.synchronize()
    if not torch.allclose(y, torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6):
        sys.exit("self-check failed: y differs from torch.nn.functional.silu(x)")
    print(f"checksum: {y.double().sum().item():.3f} {y[12345].item():.6f}")


if __name__ == "__main__":
    main()
