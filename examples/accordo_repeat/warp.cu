// Repeated-launch case: CORRECT REWRITE. One warp per row: each lane adds every 32nd square (coalesced
// loads), then a shuffle tree adds the lanes' sums: the same norms in another order of additions, so they
// differ from the reference's in the last bits, at every one of the 10 launches.
// Usage: warp [rows] [cols]   (host program: row_norm.cuh)
#include "row_norm.cuh"

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
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
