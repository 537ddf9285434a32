/* gemm_wgmma.cu - our own GEMM for Hopper (sm_90a): 16-bit row-major
 * C [M, N] = A [M, K] B [K, N] (+ bias [N]) (-> activation), f32
 * accumulation on the warpgroup tensor-core instructions (wgmma).
 *
 * Why ours beside cuBLASLt: at small M (the mlp's batch of 256) every
 * library kernel runs one wave of blocks whose pipeline fill and drain
 * are a large part of the time.  This kernel
 *   - loads the weights B of its first stages before it waits for the
 *     kernel ahead (programmatic dependent launch), when B is fixed for
 *     the run (a param or a value the prologue caches), so its fill
 *     overlaps the previous kernel's tail;
 *   - splits K across a cluster of blocks that add their partial tiles
 *     through distributed shared memory (no workspace, no second kernel,
 *     the same sum order every run);
 *   - fuses bias and any activation (exact GELU included) into the store.
 *
 * Tile: 128 x 64 per block of two warpgroups (each 64 rows, m64n64k16),
 * K in steps of 64; STAGES buffers of A (128 x 64) and B (64 x 64) in
 * shared memory, filled with cp.async into the 128-byte swizzled layout
 * wgmma reads (A K-major, B N-major: wgmma's transposed-B form).
 * Requirements (rlx_cu_wg_fits): N % 64 == 0, K % (64 * split) == 0,
 * 16-byte aligned rows and bases; any M. */
#include <cooperative_groups.h>

#include "backends/cuda/cuda_gemm.h"

namespace cg = cooperative_groups;

enum { WG_BM = 128, WG_BN = 64, WG_BK = 64, WG_THREADS = 256 };
enum { WG_A_BYTES = WG_BM * WG_BK * 2, WG_B_BYTES = WG_BK * WG_BN * 2, WG_STAGE_BYTES = WG_A_BYTES + WG_B_BYTES };

static size_t wg_smem_bytes(int stages) { return (size_t)stages * WG_STAGE_BYTES + 1024; /* + alignment slack */ }

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_DEVICE_OK 1
#endif

#ifdef WG_DEVICE_OK
/* A shared-memory matrix descriptor for the 128-byte swizzle: rows of 128
 * bytes, 8-row groups sbo bytes apart. */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | (uint64_t)((lbo >> 4) & 0x3FFF) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFF) << 32 | (uint64_t)1 << 62;
}

__device__ __forceinline__ void wg_cp16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

/* D (64 x 64, f32) += A (64 x 16, from desc a) * B (16 x 64, from desc b). */
template <typename T> __device__ __forceinline__ void wg_mma(float (&d)[32], uint64_t a, uint64_t b);

#define WG_MMA_ASM(TY)                                                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                          \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                         \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                           \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                 \
                 "%32, %33, p, 1, 1, 0, 1;\n}\n"                                                                     \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),   \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),          \
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),        \
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),        \
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                             \
                 : "l"(a), "l"(b))

template <> __device__ __forceinline__ void wg_mma<__half>(float (&d)[32], uint64_t a, uint64_t b)
{
    WG_MMA_ASM("f16");
}
template <> __device__ __forceinline__ void wg_mma<__nv_bfloat16>(float (&d)[32], uint64_t a, uint64_t b)
{
    WG_MMA_ASM("bf16");
}
#undef WG_MMA_ASM

/* Issues the copies of A's tile (rows m0.., columns k0..) into stage
 * buffer sa: chunk c of row r lands at chunk c ^ (r % 8) of its 128-byte
 * row (the swizzle wgmma's descriptor names).  Rows past M read zeros. */
template <typename T>
__device__ __forceinline__ void wg_load_a(uint32_t sa, const T *A, int64_t lda, int64_t M, int64_t m0, int64_t k0)
{
#pragma unroll
    for (int i = 0; i < WG_BM * 8 / WG_THREADS; i++) {
        int c = threadIdx.x + i * WG_THREADS, r = c >> 3, ch = c & 7;
        bool ok = m0 + r < M;
        const T *src = A + (ok ? m0 + r : 0) * lda + k0 + ch * 8;
        wg_cp16(sa + r * 128 + ((ch ^ (r & 7)) << 4), src, ok);
    }
}

/* B's tile (rows k0.. of 64, columns n0..): one row of 64 columns per 128
 * bytes, swizzled the same way. */
template <typename T>
__device__ __forceinline__ void wg_load_b(uint32_t sb, const T *B, int64_t ldb, int64_t k0, int64_t n0)
{
#pragma unroll
    for (int i = 0; i < WG_BK * 8 / WG_THREADS; i++) {
        int c = threadIdx.x + i * WG_THREADS, r = c >> 3, ch = c & 7;
        wg_cp16(sb + r * 128 + ((ch ^ (r & 7)) << 4), B + (k0 + r) * ldb + n0 + ch * 8, true);
    }
}

/* The dynamic shared memory, its start rounded up to 1024 bytes (the
 * swizzle pattern repeats every 1024), as a shared-window address, and
 * that address as a pointer. */
__device__ __forceinline__ uint32_t wg_smem_base(void)
{
    extern __shared__ uint8_t wg_raw[];
    return ((uint32_t)__cvta_generic_to_shared(wg_raw) + 1023) & ~1023u;
}
__device__ __forceinline__ float4 *wg_smem_ptr(uint32_t base)
{
    extern __shared__ uint8_t wg_raw[];
    return (float4 *)(wg_raw + (base - (uint32_t)__cvta_generic_to_shared(wg_raw)));
}

/* Bias, activation, conversion and the store of one accumulator pair. */
template <typename T>
__device__ __forceinline__ void wg_store2(T *C, int64_t ldc, int64_t M, int64_t row, int64_t col, float v0, float v1,
                                          const T *bias, int act)
{
    if (row >= M)
        return;
    if (bias) {
        v0 += cu_tof<T>(bias[col]);
        v1 += cu_tof<T>(bias[col + 1]);
    }
    if (act) {
        v0 = cu_act_f(act, v0);
        v1 = cu_act_f(act, v1);
    }
    union {
        uint32_t u;
        T t[2];
    } p;
    p.t[0] = cu_fromf<T>(v0);
    p.t[1] = cu_fromf<T>(v1);
    *(uint32_t *)(C + row * ldc + col) = p.u;
}
#endif

/* One block: the 128 x 64 tile (blockIdx.y, blockIdx.x) of C over K range
 * blockIdx.z of gridDim.z (a cluster along z adds the parts). */
template <typename T, int STAGES>
__global__ void __launch_bounds__(WG_THREADS) wg_gemm(const T *A, const T *B, T *C, const T *bias, int64_t M,
                                                      int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int act,
                                                      int b_fixed)
{
    cu_prefetch_then_wait(b_fixed != 0, [&] {
#ifdef WG_DEVICE_OK
        /* B is fixed for the run: its first stages load before the wait */
        const uint32_t base = wg_smem_base();
        const int64_t kpart = K / gridDim.z, kb = blockIdx.z * kpart;
        const int nk = (int)(kpart / WG_BK);
        for (int s = 0; s < STAGES - 2 && s < nk; s++)
            wg_load_b(base + s * WG_STAGE_BYTES + WG_A_BYTES, B, ldb, kb + s * WG_BK, blockIdx.x * (int64_t)WG_BN);
#endif
    });
#ifdef WG_DEVICE_OK
    const uint32_t base = wg_smem_base();
    const int64_t m0 = blockIdx.y * (int64_t)WG_BM, n0 = blockIdx.x * (int64_t)WG_BN;
    const int64_t kpart = K / gridDim.z, kb = blockIdx.z * kpart;
    const int nk = (int)(kpart / WG_BK);
    constexpr int AHEAD = STAGES - 2; /* stages in flight while one is computed and one may still be read */
    const int wg = threadIdx.x >> 7;

    for (int s = 0; s < AHEAD; s++) {
        if (s < nk) {
            uint32_t st = base + s * WG_STAGE_BYTES;
            wg_load_a(st, A, lda, M, m0, kb + s * WG_BK);
            if (!b_fixed)
                wg_load_b(st + WG_A_BYTES, B, ldb, kb + s * WG_BK, n0);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }

    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++)
        d[i] = 0.0f;

    for (int kt = 0; kt < nk; kt++) {
        /* stage kt has landed (AHEAD - 1 younger groups may be pending) */
        asm volatile("cp.async.wait_group %0;" ::"n"(AHEAD - 1) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        /* every warpgroup is past its wait for stage kt - 2: refill that buffer */
        int ld = kt + AHEAD;
        if (ld < nk) {
            uint32_t st = base + (ld % STAGES) * WG_STAGE_BYTES;
            wg_load_a(st, A, lda, M, m0, kb + ld * WG_BK);
            wg_load_b(st + WG_A_BYTES, B, ldb, kb + ld * WG_BK, n0);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");

        uint32_t sa = base + (kt % STAGES) * WG_STAGE_BYTES + wg * (64 * 128), sb = base + (kt % STAGES) * WG_STAGE_BYTES + WG_A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int k16 = 0; k16 < WG_BK / 16; k16++)
            /* A: +32 bytes per 16 columns inside its swizzled rows; B: two
             * 8-row groups (2 x 1024 bytes) per 16 rows */
            wg_mma<T>(d, wg_desc(sa + k16 * 32, 16, 1024), wg_desc(sb + k16 * 2048, 1024, 1024));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    asm volatile("cp.async.wait_group 0;" ::: "memory");

    /* accumulator i of this thread: row 16 w + lane / 4 (+ 8 for i % 4 >= 2),
     * column 8 (i / 4) + 2 (lane % 4) + i % 2, w the warp in its warpgroup */
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int64_t row = m0 + wg * 64 + warp * 16 + (lane >> 2), col = n0 + (lane & 3) * 2;
    if (gridDim.z == 1) {
#pragma unroll
        for (int q = 0; q < 8; q++) {
            wg_store2(C, ldc, M, row, col + q * 8, d[4 * q], d[4 * q + 1], bias, act);
            wg_store2(C, ldc, M, row + 8, col + q * 8, d[4 * q + 2], d[4 * q + 3], bias, act);
        }
        return;
    }
    /* split K: every block of the cluster leaves its part in its shared
     * memory; block z adds fragments z, z + S, ... of all parts in the
     * order of z and stores them */
    __syncthreads();
    float4 *part = wg_smem_ptr(base);
#pragma unroll
    for (int q = 0; q < 8; q++)
        part[q * WG_THREADS + threadIdx.x] = make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]);
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const int S = (int)gridDim.z, z = (int)blockIdx.z;
    for (int q = z; q < 8; q += S) {
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int r = 0; r < S; r++) {
            const float4 *p = cl.map_shared_rank(part, r);
            float4 v = p[q * WG_THREADS + threadIdx.x];
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        wg_store2(C, ldc, M, row, col + q * 8, s.x, s.y, bias, act);
        wg_store2(C, ldc, M, row + 8, col + q * 8, s.z, s.w, bias, act);
    }
    cl.sync(); /* no block leaves while another reads its part */
#endif
}

/* ------------------------------------------------------------------ host */

bool rlx_cu_wg_available(void)
{
#ifdef RLX_HAVE_SM90A
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, major = 0, minor = 0;
        ok = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
             minor == 0;
        cudaGetLastError();
    }
    return ok == 1;
#else
    return false; /* the build has no sm_90a machine code */
#endif
}

bool rlx_cu_wg_fits(rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                    const void *A, const void *B, const void *C)
{
    return (dt == RLX_F16 || dt == RLX_BF16) && M > 0 && N > 0 && K > 0 && N % WG_BN == 0 && K % WG_BK == 0 &&
           lda % 8 == 0 && ldb % 8 == 0 && ldc % 2 == 0 && cu_ptr_align(A) == 16 && cu_ptr_align(B) == 16 &&
           cu_ptr_align(C) >= 4 && (M + WG_BM - 1) / WG_BM <= 65535 && rlx_cu_wg_available();
}

int rlx_cu_wg_candidates(int64_t M, int64_t N, int64_t K, cu_wg_plan *out, int max)
{
    static const int splits[] = {1, 2, 4, 8}, stages[] = {4, 6};
    const char *fs = getenv("RLX_CUDA_WGMMA_SPLIT"), *fst = getenv("RLX_CUDA_WGMMA_STAGES");
    int n = 0;
    (void)M, (void)N;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            int s = splits[i];
            if (K % (WG_BK * s) || (fs && *fs && atoi(fs) != s) || (fst && *fst && atoi(fst) != stages[j]))
                continue;
            if (n < max)
                out[n++] = (cu_wg_plan){s, stages[j]};
        }
    return n;
}

template <typename T, int STAGES>
static void wg_launch_t(const cu_wg_plan *p, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                        const void *A, const void *B, void *C, const void *bias, int act, bool b_fixed)
{
    size_t smem = wg_smem_bytes(STAGES);
    static bool attr_set;
    if (!attr_set) {
        cudaFuncSetAttribute(wg_gemm<T, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr_set = true;
    }
    dim3 grid((unsigned)(N / WG_BN), (unsigned)((M + WG_BM - 1) / WG_BM), (unsigned)p->split);
    cu_launch_cluster(wg_gemm<T, STAGES>, grid, dim3(WG_THREADS), smem, p->split, (const T *)A, (const T *)B, (T *)C,
                      (const T *)bias, M, K, lda, ldb, ldc, act, (int)b_fixed);
}

void rlx_cu_wg_launch(const cu_wg_plan *p, rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                      int64_t ldc, const void *A, const void *B, void *C, const void *bias, int act, bool b_fixed)
{
    if (dt == RLX_F16)
        (p->stages == 6 ? wg_launch_t<__half, 6> : wg_launch_t<__half, 4>)(p, M, N, K, lda, ldb, ldc, A, B, C, bias,
                                                                           act, b_fixed);
    else
        (p->stages == 6 ? wg_launch_t<__nv_bfloat16, 6> : wg_launch_t<__nv_bfloat16, 4>)(
            p, M, N, K, lda, ldb, ldc, A, B, C, bias, act, b_fixed);
}
