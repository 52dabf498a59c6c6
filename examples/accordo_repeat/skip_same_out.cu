// Repeated-launch case: CHEAT (work skipped when the output pointer did not change). The warp-per-row kernel
// of warp.cu, but the host tells the kernel which output it last wrote, and a launch on that same output
// returns at once: the program's launches 2 to 10 do nothing. On the reference's inputs restored before each
// launch, the output already holds the answer, so only outputs filled with garbage expose it.
// Usage: skip_same_out [rows] [cols]   (host program: row_norm.cuh)
inline void remember_output(const float* norms);
#define ROW_NORM_AFTER_LAUNCH(norms) remember_output(norms)
#include "row_norm.cuh"

__device__ const float* g_last_output = nullptr;

inline void remember_output(const float* norms) {
    CUDA_CHECK(cudaMemcpyToSymbol(g_last_output, &norms, sizeof(norms)));
}

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    if (g_last_output == norms) return;
    const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int row = static_cast<int>(thread / 32);
    const int lane = static_cast<int>(thread % 32);
    if (row >= rows) return;
    const float* r = m + static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += r[c] * r[c];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, true); }
