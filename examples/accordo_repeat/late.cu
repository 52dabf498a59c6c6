// Repeated-launch case: CHEAT (outputs written on a later launch). The warp-per-row kernel of warp.cu, but a
// launch only writes once the host has armed it after the first: the first launch leaves the output as it
// was, and the program's final output is still right. Judged launch by launch, its first launch fails.
// Usage: late [rows] [cols]   (host program: row_norm.cuh)
inline void arm(const float* norms);
#define ROW_NORM_AFTER_LAUNCH(norms) arm(norms)
#include "row_norm.cuh"

__device__ int g_armed = 0;

inline void arm(const float*) {
    const int armed = 1;
    CUDA_CHECK(cudaMemcpyToSymbol(g_armed, &armed, sizeof(armed)));
}

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int row = static_cast<int>(thread / 32);
    const int lane = static_cast<int>(thread % 32);
    if (row >= rows) return;
    const float* r = m + static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += r[c] * r[c];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0 && g_armed) norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, true); }
