#!/usr/bin/env python3
"""triton_bins: per-bin sums of 16M float values with 8 bins, in Triton.

Bottleneck: every element is added into its bin with `tl.atomic_add`, so 16M atomics land on 8
addresses and serialize in the L2 slices that own them (atomic contention). Triton's atomic_add
returns the old value, so it compiles to ATOMG, not RED. Usage: ./triton_bins.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

N = 1 << 24
BINS = 8
BLOCK = 1024


@triton.jit
def bin_sums(values_ptr, keys_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(values_ptr + offsets, mask=mask, other=0.0)
    keys = tl.load(keys_ptr + offsets, mask=mask, other=0)
    tl.atomic_add(sums_ptr + keys, values, mask=mask)  # intelliperf: atomicContention


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    generator = torch.Generator(device="cuda").manual_seed(7)
    values = torch.randint(-4, 5, (N,), device="cuda", generator=generator).float() * 0.25
    keys = torch.randint(0, BINS, (N,), device="cuda", generator=generator, dtype=torch.int32)
    sums = torch.zeros(BINS, device="cuda")
    for _ in range(iterations):
        sums.zero_()
        bin_sums[(triton.cdiv(N, BLOCK),)](values, keys, sums, N, BLOCK=BLOCK)
    torch.cuda.synchronize()
    print("checksum:", " ".join(f"{s:.2f}" for s in sums.tolist()))


if __name__ == "__main__":
    main()
