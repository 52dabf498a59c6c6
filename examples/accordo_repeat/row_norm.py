"""Repeated-launch case in Triton: every row's Euclidean norm, launched 10 times on one output buffer.

    python3 row_norm.py BLOCK [rows] [cols]

The kernel `row_norm` adds the squares of a row BLOCK columns at a time, then the BLOCK partial sums: its
order of additions, and so the last bits of each norm, depend on BLOCK. `row_norm.py 16` is the reference;
`row_norm.py 256` is a correct rewrite of it (more columns per step, as a tuning pass would choose).
"""

from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl

LAUNCHES = 10


@triton.jit
def row_norm(m_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(m_ptr + row * cols + offsets, mask=offsets < cols, other=0.0)
        acc += x * x
    tl.store(out_ptr + row, tl.sqrt(tl.sum(acc, axis=0)))


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    block = int(argv[0])
    rows = int(argv[1]) if len(argv) > 1 else 4096
    cols = int(argv[2]) if len(argv) > 2 else 1000
    generator = torch.Generator(device="cuda").manual_seed(7)
    m = torch.rand((rows, cols), device="cuda", generator=generator) * 2 - 1
    norms = torch.zeros(rows, device="cuda")
    for _ in range(LAUNCHES):
        row_norm[(rows,)](m, norms, cols, BLOCK=block)
    print(f"checksum: {norms.double().sum().item():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
