#!/usr/bin/env python3
"""model: one block of a PyTorch model (matrix product, ReLU, layer norm, a reduction) with one Triton
kernel of the project's own, which writes the block's output transposed for the next layer.

Most kernels come from PyTorch's libraries (cuBLAS, ATen); only `write_transposed` has source here, so that is
the kernel IntelliPerf can diagnose and rewrite. Bottleneck: each program writes a run of one row of the
output and reads it from one column of the input, `cols` floats apart per lane (uncoalesced loads).
Usage: ./model.py [iterations]
"""

import sys

import torch
import triton
import triton.language as tl

ROWS = 8192
COLS = 2048
BLOCK = 256


@triton.jit
def write_transposed(src_ptr, dst_ptr, rows, cols, BLOCK: tl.constexpr):
    col = tl.program_id(0)
    row = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = row < rows
    tl.store(dst_ptr + col * rows + row, tl.load(src_ptr + row * cols + col, mask=mask), mask=mask)  # intelliperf: memoryAccess


def transposed(h: torch.Tensor) -> torch.Tensor:
    rows, cols = h.shape
    out = torch.empty((cols, rows), device=h.device, dtype=h.dtype)
    write_transposed[(cols, triton.cdiv(rows, BLOCK))](h, out, rows, cols, BLOCK=BLOCK)
    return out


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    generator = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(ROWS, COLS, device="cuda", generator=generator)
    weight = torch.randn(COLS, COLS, device="cuda", generator=generator) / COLS**0.5
    for _ in range(iterations):
        h = torch.nn.functional.layer_norm(torch.relu(x @ weight), (COLS,))
        out = transposed(h).sum(dim=1)
    torch.cuda.synchronize()
    print(f"checksum: {out.double().sum().item():.3f} {out[5].item():.4f}")


if __name__ == "__main__":
    main()
