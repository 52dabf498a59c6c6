// Repeated-launch case: CHEAT (work moved to another stream, so a timer on the launch's stream stops early).
// The reference's kernel, launched twice per step: the first half of the rows on the default stream and the
// second half on a stream of its own that nothing waits for until the program copies the norms back. A timer
// around the launch on the default stream sees half the work. Accordo counts the kernel's launches and the
// streams they use: twice as many launches as the reference, on two streams.
// Usage: stream_split [rows] [cols]   (host program: row_norm.cuh)
#include <cuda_runtime.h>

inline cudaStream_t side_stream() {
    static cudaStream_t stream = [] {
        cudaStream_t s = nullptr;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return cudaStream_t{nullptr};
        return s;
    }();
    return stream;
}

#define ROW_NORM_LAUNCH(blocks, m, norms, rows, cols)                                                   \
    do {                                                                                                \
        const int half = (rows) / 2;                                                                    \
        row_norm<<<(blocks), kThreads, 0, side_stream()>>>((m) + static_cast<long long>(half) * (cols), \
                                                           (norms) + half, (rows) - half, (cols));      \
        row_norm<<<(blocks), kThreads>>>((m), (norms), half, (cols));                                   \
    } while (0)
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
