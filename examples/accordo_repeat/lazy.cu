// Repeated-launch case: CHEAT (memory that happens to hold the answer). One thread per row, as ref.cu, but a
// row whose norm is already nonzero is taken as done: every launch after the first finds the answer left by
// the one before. Outputs filled with NaN before each launch expose it (NaN is not zero: the row is skipped).
// Usage: lazy [rows] [cols]   (host program: row_norm.cuh)
#include "row_norm.cuh"

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    if (!(norms[row] == 0.0f)) return;
    const float* r = m + static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += r[c] * r[c];
    norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, false); }
