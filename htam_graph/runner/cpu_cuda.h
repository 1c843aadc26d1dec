// A CPU stand-in for the CUDA device, for testing catalog kernels on a machine without a GPU.
//
// Each block runs as one OS thread per CUDA thread (blocks one after another), so
// __syncthreads is a real barrier and warp shuffles a real exchange between 32 threads;
// __shared__ variables are function-level statics, shared by the block that is running.
// Math is the host's libm in fp32, which differs from CUDA's by an ulp or two: the tests
// compare with the reference at the judge's tolerances, not bit for bit.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <barrier>
#include <climits>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct uint3 { unsigned x, y, z; };
struct float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

thread_local uint3 threadIdx, blockIdx;
uint3 blockDim, gridDim;
unsigned char* htam_dynamic_smem;

struct __half { _Float16 v; };
struct __half2 { __half x, y; };
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { __half h; h.v = (_Float16)f; return h; }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__float2half_rn(a), __float2half_rn(b)}; }
struct __nv_bfloat16 { uint16_t bits; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
inline float __bfloat162float(__nv_bfloat16 b) { uint32_t u = (uint32_t)b.bits << 16; float f; memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { b.bits = 0x7fc0; return b; }
    u += 0x7fffu + ((u >> 16) & 1u);
    b.bits = (uint16_t)(u >> 16);
    return b;
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <typename A, typename B> inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <typename A, typename B> inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }

inline void __pipeline_memcpy_async(void* dst, const void* src, size_t size, size_t zfill = 0) {
    memcpy(dst, src, size - zfill);
    memset((char*)dst + size - zfill, 0, zfill);
}
inline void __pipeline_commit() {}
inline void __pipeline_wait_prior(size_t) {}

struct HtamBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<uint64_t> lanes;
    std::vector<unsigned> mma;  // per lane: the A and B fragment registers of htam_mma_tf32
};
thread_local HtamBlock* htam_block;
thread_local int htam_lane, htam_warp;

inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }

// mma.sync m16n8k8 in TF32 (the catalog's htam_mma_tf32; its PTX is taken out of the source): each lane posts
// its A (16x8, 4 registers) and B (8x8, 2 registers) fragment registers, and after a warp barrier computes its
// own 4 outputs from the whole tiles, in PTX's fragment layout. The tensor cores read only the upper 19 bits of
// each TF32 operand, and so does this.
inline void htam_mma_tf32(float* d, const unsigned* a, const unsigned* b) {
    unsigned* mine = &htam_block->mma[(htam_warp * 32 + htam_lane) * 6];
    for (int e = 0; e < 4; ++e) mine[e] = a[e];
    mine[4] = b[0];
    mine[5] = b[1];
    htam_block->warps[htam_warp]->arrive_and_wait();
    const unsigned* warp = &htam_block->mma[htam_warp * 32 * 6];
    auto A = [&](int row, int k) { return __uint_as_float(warp[((row % 8) * 4 + k % 4) * 6 + row / 8 + 2 * (k / 4)] & 0xffffe000u); };
    auto B = [&](int k, int col) { return __uint_as_float(warp[(col * 4 + k % 4) * 6 + 4 + k / 4] & 0xffffe000u); };
    const int g = htam_lane / 4, t = htam_lane % 4;
    float out[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        float acc = d[e];
        for (int k = 0; k < 8; ++k) acc = fmaf(A(row, k), B(k, col), acc);
        out[e] = acc;
    }
    htam_block->warps[htam_warp]->arrive_and_wait();  // every lane has read the tiles before any posts new ones
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}


inline void __syncthreads() { htam_block->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { htam_block->warps[htam_warp]->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T> inline T htam_exchange(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    htam_block->lanes[htam_warp * 32 + htam_lane] = bits;
    htam_block->warps[htam_warp]->arrive_and_wait();
    uint64_t got = htam_block->lanes[htam_warp * 32 + (src & 31)];
    htam_block->warps[htam_warp]->arrive_and_wait();
    T out;
    memcpy(&out, &got, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask, int = 32) { return htam_exchange(v, htam_lane ^ mask); }
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned d, int = 32) {
    return htam_exchange(v, htam_lane + (int)d < 32 ? htam_lane + (int)d : htam_lane);
}
template <typename T> inline T __shfl_up_sync(unsigned, T v, unsigned d, int = 32) {
    return htam_exchange(v, htam_lane >= (int)d ? htam_lane - (int)d : htam_lane);
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src, int = 32) { return htam_exchange(v, src); }

template <typename T> inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }

template <typename... A, size_t... I>
inline void htam_call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*reinterpret_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <typename... A>
inline void htam_run(void (*f)(A...), const unsigned* d, size_t smem, void** args) {
    // One OS thread per CUDA thread of a block, reused for every block of the grid in turn.
    gridDim = {d[0], d[1], d[2]};
    blockDim = {d[3], d[4], d[5]};
    const unsigned threads = d[3] * d[4] * d[5];
    const unsigned long long blocks = (unsigned long long)d[0] * d[1] * d[2];
    std::vector<unsigned char> dynamic(smem + 64);
    htam_dynamic_smem = dynamic.data() + (16 - (reinterpret_cast<uintptr_t>(dynamic.data()) % 16)) % 16;
    auto make_block = [&]() {
        memset(dynamic.data(), 0xA5, dynamic.size());  // shared memory starts as garbage, as on a GPU
        auto block = std::make_unique<HtamBlock>();
        block->block = std::make_unique<std::barrier<>>(threads);
        const unsigned warps = (threads + 31) / 32;
        for (unsigned w = 0; w < warps; ++w)
            block->warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - 32 * w)));
        block->lanes.assign(warps * 32, 0);
        block->mma.assign(warps * 32 * 6, 0);
        return block;
    };
    unsigned long long current = 0;
    std::unique_ptr<HtamBlock> block = make_block();
    auto next = [&]() noexcept {
        ++current;
        if (current < blocks) block = make_block();
    };
    std::barrier<decltype(next)> done(threads, next);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            threadIdx = {t % d[3], (t / d[3]) % d[4], t / (d[3] * d[4])};
            htam_lane = t % 32;
            htam_warp = t / 32;
            while (current < blocks) {
                blockIdx = {(unsigned)(current % d[0]), (unsigned)((current / d[0]) % d[1]), (unsigned)(current / ((unsigned long long)d[0] * d[1]))};
                HtamBlock* mine = block.get();
                htam_block = mine;
                htam_call(f, args, std::index_sequence_for<A...>{});
                mine->block->arrive_and_drop();  // an exited thread no longer holds the block's barriers back
                mine->warps[htam_warp]->arrive_and_drop();
                done.arrive_and_wait();
            }
        });
    for (auto& th : pool) th.join();
}
