// Repeated-launch case: REFERENCE. One thread per row adds the squares of its row in order.
// Usage: ref [rows] [cols]   (host program: row_norm.cuh)
#include "row_norm.cuh"

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* r = m + static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += r[c] * r[c];
    norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, false); }
