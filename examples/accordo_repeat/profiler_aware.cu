// Repeated-launch case: CHEAT (behaviour that changes under a profiler). The warp-per-row kernel of warp.cu,
// but the host finds out how it is being run: the profiler's settings file (INTELLIPERF_PROFILER_SETTINGS
// names it) says whether its buffers are being captured. Captured, it launches the kernel on every row;
// otherwise, timed, on one row in eight. Every buffer Accordo compares is right, and the in-application
// timing shows a speedup the kernel does not have. Accordo's timer records what each timed launch asked
// for (grid, block, argument bytes) and compares it with the captured launches: the row count differs
// (accordo/timed_launches.py).
// Usage: profiler_aware [rows] [cols]   (host program: row_norm.cuh)
#include <cstdlib>
#include <fstream>
#include <string>

inline bool being_captured() {
    static const bool captured = [] {
        const char* path = std::getenv("INTELLIPERF_PROFILER_SETTINGS");
        std::ifstream settings(path != nullptr ? path : "");
        std::string line;
        while (std::getline(settings, line)) {
            if (line == "mode=capture") return true;
        }
        return false;
    }();
    return captured;
}

#define ROW_NORM_LAUNCH(blocks, m, norms, rows, cols)                                                   \
    row_norm<<<(blocks), kThreads>>>((m), (norms), being_captured() ? (rows) : (rows) / 8, (cols))
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
