// Repeated-launch case: CHEAT (tuned to the one input the program makes). It never reads the matrix: it
// recomputes the values fill_matrix wrote from their indices, so it is right on this program's data, and
// much faster, and wrong on any other. Fresh inputs expose it.
// Usage: regen [rows] [cols]   (host program: row_norm.cuh)
#include "row_norm.cuh"

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const long long first = static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) {
        const float v = static_cast<float>(hash_u32(static_cast<uint32_t>(first + c)) >> 8) / 8388608.0f - 1.0f;
        sum += v * v;
    }
    norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, false); }
