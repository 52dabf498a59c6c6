#!/usr/bin/env python3
"""scale_strided: dst = 0.5 * src over 16M floats, in Triton.

Fixed: lane t of program p handles element p * BLOCK + t, so a warp's accesses are contiguous.
Usage: ./scale_strided_fixed.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

N = 1 << 24
BLOCK = 1024


@triton.jit
def scale_elements(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    index = t
    mask = t < n
    tl.store(dst_ptr + index, tl.load(src_ptr + index, mask=mask) * 0.5, mask=mask)


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    generator = torch.Generator(device="cuda").manual_seed(11)
    src = torch.randint(-64, 65, (N,), device="cuda", generator=generator).float() * 0.25
    dst = torch.empty_like(src)
    for _ in range(iterations):
        scale_elements[(triton.cdiv(N, BLOCK),)](src, dst, N, BLOCK=BLOCK)
    torch.cuda.synchronize()
    print(f"checksum: {dst.double().sum().item():.2f} {dst[12345].item():.2f}")


if __name__ == "__main__":
    main()
