#!/usr/bin/env python3
"""triton_bins: per-bin sums of 16M float values with 8 bins, in Triton.

Fixed: each program sums 16 blocks of 512 per bin in registers first and issues 8 atomics, one per bin.
Usage: ./triton_bins_fixed.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

N = 1 << 24
BINS = 8
BLOCK = 512
TILES = 16


@triton.jit
def bin_sums(values_ptr, keys_ptr, sums_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr):
    bins = tl.arange(0, 8)
    partial = tl.zeros((8, BLOCK), dtype=tl.float32)
    for tile in range(TILES):
        offsets = (tl.program_id(0) * TILES + tile) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        values = tl.load(values_ptr + offsets, mask=mask, other=0.0)
        keys = tl.load(keys_ptr + offsets, mask=mask, other=8)
        partial += tl.where(keys[None, :] == bins[:, None], values[None, :], 0.0)
    tl.atomic_add(sums_ptr + bins, tl.sum(partial, axis=1))


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    generator = torch.Generator(device="cuda").manual_seed(7)
    values = torch.randint(-4, 5, (N,), device="cuda", generator=generator).float() * 0.25
    keys = torch.randint(0, BINS, (N,), device="cuda", generator=generator, dtype=torch.int32)
    sums = torch.zeros(BINS, device="cuda")
    for _ in range(iterations):
        sums.zero_()
        bin_sums[(triton.cdiv(N, BLOCK * TILES),)](values, keys, sums, N, BLOCK=BLOCK, TILES=TILES)
    torch.cuda.synchronize()
    print("checksum:", " ".join(f"{s:.2f}" for s in sums.tolist()))


if __name__ == "__main__":
    main()
