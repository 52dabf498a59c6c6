// aos_field: scale one field of an array of 8-float Particle structs.
// Layout: array of structs (AoS), particle i = floats [8*i, 8*i + 8).
// Bottleneck: each thread loads only p[i].x, so a warp's load touches 32
// different 32-byte sectors and uses 4 of every 32 bytes fetched
// (uncoalesced / wasteful global memory access).
// Usage: aos_field [iterations]
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
constexpr int kN = 1 << 23;            // particles (8 floats each: 256 MiB)
constexpr int kDefaultIterations = 3000;
constexpr float kScale = 0.5f;

struct Particle {
    float x, y, z;
    float vx, vy, vz;
    float mass, charge;
};
static_assert(sizeof(Particle) == 8 * sizeof(float), "Particle must be 8 packed floats");
constexpr int kFields = 8;

// Logical value of field f of particle i (identical in both layouts).
__device__ inline float particle_value(int i, int f, uint32_t seed) {
    uint32_t h = hash_u32((static_cast<uint32_t>(i) * kFields + static_cast<uint32_t>(f)) ^ seed);
    return static_cast<float>(h % 20001u) * 1.0e-4f - 1.0f;
}

__global__ void init_particles(float* __restrict__ particles, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Particle p;
        p.x = particle_value(i, 0, seed);
        p.y = particle_value(i, 1, seed);
        p.z = particle_value(i, 2, seed);
        p.vx = particle_value(i, 3, seed);
        p.vy = particle_value(i, 4, seed);
        p.vz = particle_value(i, 5, seed);
        p.mass = particle_value(i, 6, seed);
        p.charge = particle_value(i, 7, seed);
        reinterpret_cast<Particle*>(particles)[i] = p;
    }
}

// out[i] = scale * x of particle i.  particles: AoS, n Particle structs.
__global__ void scale_field(const float* __restrict__ particles, float* __restrict__ out, float scale, int n) {
    const Particle* p = reinterpret_cast<const Particle*>(particles);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = p[i].x;  // intelliperf: memoryAccess
        out[i] = x * scale;
    }
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    float* d_particles = nullptr;  // n particles = n * kFields floats
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_particles, static_cast<size_t>(n) * kFields * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, static_cast<size_t>(n) * sizeof(float)));

    init_particles<<<(n + 255) / 256, 256>>>(d_particles, n, 0x5eed0005U);
    CUDA_CHECK(cudaGetLastError());

    const int blocks = (n + kBlock - 1) / kBlock;
    for (int it = 0; it < iterations; ++it) {
        scale_field<<<blocks, kBlock>>>(d_particles, d_out, kScale, n);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_out(n);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (int i = 0; i < n; ++i) checksum += static_cast<double>(h_out[i]) * (1 + i % 11);
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_particles));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
