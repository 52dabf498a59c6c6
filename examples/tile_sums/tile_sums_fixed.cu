// tile_sums (fixed): sums of 16M 2-D points over tiles of 1, 2, 4, 8, 16 and 32 consecutive points (a
// multi-resolution summary), then a normalisation and a scaling pass: nine kernels, most of them
// instantiations of a template in a namespace, one a __device__ lambda, as in real CUDA code.
// Fixed version: each warp reads 32 consecutive points per step (coalesced) and groups of TILE
// lanes add up one tile with warp shuffles. Same kernels, names and parameters.
// Usage: tile_sums [iterations]
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_CHECK(call)                                                     \
    do {                                                                     \
        cudaError_t err_ = (call);                                           \
        if (err_ != cudaSuccess) {                                           \
            std::fprintf(stderr, "%s:%d: CUDA error: %s (%s)\n", __FILE__,   \
                         __LINE__, cudaGetErrorString(err_), #call);         \
            std::exit(1);                                                    \
        }                                                                    \
    } while (0)

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static int parse_iterations(int argc, char** argv, int default_iterations) {
    if (argc <= 1) return default_iterations;
    int iterations = std::atoi(argv[1]);
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        std::exit(2);
    }
    return iterations;
}

constexpr int kBlock = 256;
constexpr int kN = 1 << 24;  // points; a multiple of every tile size
constexpr int kDefaultIterations = 40;

__global__ void init_points(float2* __restrict__ points, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t h = hash_u32(static_cast<uint32_t>(i) ^ seed);
        points[i] = make_float2(static_cast<float>(h & 0xffffu) * 1.0e-4f, static_cast<float>(h >> 16) * 1.0e-4f);
    }
}

namespace geom {

template <int TILE>
__global__ void tile_sums(const float2* __restrict__ points, float* __restrict__ sums, int tiles) {
    // Each warp sums 32 consecutive tiles: in step s its lanes read the 32 consecutive points
    // s*32 .. s*32+31 of those tiles (coalesced), and groups of TILE lanes add up one tile.
    static_assert(TILE >= 1 && TILE <= 32 && (TILE & (TILE - 1)) == 0, "TILE is a power of two <= 32");
    const int lane = threadIdx.x % 32;
    const int first_tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32;
    if (first_tile >= tiles) return;
    for (int step = 0; step < TILE; ++step) {
        const int point = first_tile * TILE + step * 32 + lane;
        const int tile = point / TILE;
        float2 p = tile < tiles ? points[point] : make_float2(0.0f, 0.0f);
        float sum = p.x * p.y;
        for (int offset = TILE / 2; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset, TILE);
        if (lane % TILE == 0 && tile < tiles) sums[tile] = sum;
    }
}

namespace detail {
__global__ void normalize(const float* __restrict__ sums, float* __restrict__ out, int n, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sums[i] * scale;
}
}  // namespace detail

}  // namespace geom

template <typename F>
__global__ void for_each_index(int n, F f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) f(i);
}

template <int TILE>
static void launch_tile_sums(const float2* points, float* sums) {
    const int tiles = kN / TILE;
    geom::tile_sums<TILE><<<(tiles + kBlock - 1) / kBlock, kBlock>>>(points, sums, tiles);
    CUDA_CHECK(cudaGetLastError());
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    float2* d_points = nullptr;
    float* d_sums[6] = {};
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_points, static_cast<size_t>(n) * sizeof(float2)));
    for (int k = 0; k < 6; ++k) CUDA_CHECK(cudaMalloc(&d_sums[k], static_cast<size_t>(n >> k) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, static_cast<size_t>(n) * sizeof(float)));

    init_points<<<(n + kBlock - 1) / kBlock, kBlock>>>(d_points, n, 0x5eed0021U);
    CUDA_CHECK(cudaGetLastError());

    const float2* points = d_points;
    const float* unit_sums = d_sums[0];
    float* out = d_out;
    for (int it = 0; it < iterations; ++it) {
        launch_tile_sums<1>(points, d_sums[0]);
        launch_tile_sums<2>(points, d_sums[1]);
        launch_tile_sums<4>(points, d_sums[2]);
        launch_tile_sums<8>(points, d_sums[3]);
        launch_tile_sums<16>(points, d_sums[4]);
        launch_tile_sums<32>(points, d_sums[5]);
        geom::detail::normalize<<<(n + kBlock - 1) / kBlock, kBlock>>>(d_sums[0], d_out, n, 0.5f);
        CUDA_CHECK(cudaGetLastError());
        for_each_index<<<(n + kBlock - 1) / kBlock, kBlock>>>(n, [=] __device__(int i) {
            out[i] = out[i] * 0.25f + unit_sums[i];
        });
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_sums(n >> 5);
    CUDA_CHECK(cudaMemcpy(h_sums.data(), d_sums[5], h_sums.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<float> h_out(n);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, h_out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (float v : h_sums) checksum += v;
    for (int i = 0; i < n; i += 4096) checksum += h_out[i];
    std::printf("tile_sums: %d points, %d iterations, checksum %.6e\n", n, iterations, checksum);
    CUDA_CHECK(cudaFree(d_points));
    for (float* s : d_sums) CUDA_CHECK(cudaFree(s));
    CUDA_CHECK(cudaFree(d_out));
    return 0;
}
