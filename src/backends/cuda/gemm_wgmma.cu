/* gemm_wgmma.cu - our own GEMM for Hopper (sm_90a): 16-bit row-major
 * C [M, N] = A [M, K] B [K, N] (+ bias [N]) (-> activation), f32
 * accumulation on the warpgroup tensor-core instructions (wgmma).
 *
 * Why ours beside cuBLASLt and cuDNN: at small M (the mlp's batch of 256)
 * every library kernel runs one wave of blocks whose pipeline fill and
 * drain are a large part of the time.  This kernel
 *   - loads the weights B of its first stages before it waits for the
 *     kernel ahead (programmatic dependent launch), when B is fixed for
 *     the run (a param or a value the prologue caches), so the fill
 *     overlaps the previous kernel's tail;
 *   - splits K across a cluster of blocks that add their partial tiles
 *     through distributed shared memory (no workspace, no second kernel,
 *     the same sum order every run);
 *   - fuses bias and any activation (exact GELU included) into the store.
 *
 * Form: warp-specialised.  One producer thread moves 128 x 64 tiles of A
 * and 64 x BN tiles of B (BN 64 or 128) with the tensor memory
 * accelerator (TMA) into a ring of shared-memory stages guarded by
 * mbarriers; two consumer warpgroups only compute (64 rows each,
 * m64nBNk16), so copies and products never wait on a block barrier.
 * Shared memory holds A K-major and B N-major (wgmma's transposed-B form)
 * in the 128-byte swizzle: row r of 128 bytes has its 16-byte chunk c at
 * c ^ (r % 8), the pattern repeating every 1024 bytes.
 * Requirements (rlx_cu_wg_fits): N % 64 == 0 (128 for 128-wide tiles),
 * K % (64 * split) == 0, 16-byte aligned rows and bases; any M (rows past
 * it read as zeros and are not stored).
 *
 * Measured on the H200 (bench/results/gpu-NOTES.md): slower
 * than cuDNN's and cuBLASLt's kernels on every shape tried (the mlp's
 * GEMMs 10.1/20.9/12.1 us against 7.6/15.5/8.4), so the tuner considers
 * it only when asked (RLX_CUDA_WGMMA=1). */
#include <cooperative_groups.h>
#include <cudaTypedefs.h> /* CUtensorMap and the driver's encoder type; the driver is reached at run time */

#include "backends/cuda/cuda_gemm.h"

namespace cg = cooperative_groups;

enum { WG_BM = 128, WG_BK = 64, WG_A_BYTES = WG_BM * WG_BK * 2 };
/* two consumer warpgroups (the threads the accumulators live in), then the producer warp */
enum { WS_THREADS = 288, WS_PRODUCER = 256 };
/* The output tile staged in shared memory at the end (wg_finish): f32 rows of BN + 8. */
template <int BN> struct wg_tile {
    static constexpr int ld = BN + 8; /* floats per staged row: the pad spreads a warp's rows over the banks */
};

static_assert(sizeof(CUtensorMap) == sizeof(((cu_wg_plan *)0)->maps[0]), "tensor map size");

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

/* D (64 x N, f32) += A (64 x 16, from desc a) * B (16 x N, from desc b);
 * B transposed (N-major).  Accumulator i of a thread: row 16 w + lane / 4
 * (+ 8 for i % 4 >= 2), column 8 (i / 4) + 2 (lane % 4) + i % 2, w its
 * warp in the warpgroup. */
template <typename T, int N> __device__ __forceinline__ void wg_mma(float (&d)[N / 2], uint64_t a, uint64_t b);

#define WG_D8(i)                                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define WG_MMA64_ASM(TY)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                     \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
                 "}, %32, %33, p, 1, 1, 0, 1;\n}\n"                                               \
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)                                       \
                 : "l"(a), "l"(b))
#define WG_MMA128_ASM(TY)                                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                             \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {"                          \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "               \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"       \
                 "}, %64, %65, p, 1, 1, 0, 1;\n}\n"                                                     \
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56) \
                 : "l"(a), "l"(b))

template <> __device__ __forceinline__ void wg_mma<__half, 64>(float (&d)[32], uint64_t a, uint64_t b)
{
    WG_MMA64_ASM("f16");
}
template <> __device__ __forceinline__ void wg_mma<__nv_bfloat16, 64>(float (&d)[32], uint64_t a, uint64_t b)
{
    WG_MMA64_ASM("bf16");
}
template <> __device__ __forceinline__ void wg_mma<__half, 128>(float (&d)[64], uint64_t a, uint64_t b)
{
    WG_MMA128_ASM("f16");
}
template <> __device__ __forceinline__ void wg_mma<__nv_bfloat16, 128>(float (&d)[64], uint64_t a, uint64_t b)
{
    WG_MMA128_ASM("bf16");
}
#undef WG_MMA64_ASM
#undef WG_MMA128_ASM
#undef WG_D8

/* The dynamic shared memory, its start rounded up to 1024 bytes (the
 * swizzle pattern repeats every 1024), as a shared-window address, and
 * that address as a pointer. */
__device__ __forceinline__ uint32_t wg_smem_base(void)
{
    extern __shared__ uint8_t wg_raw[];
    return ((uint32_t)__cvta_generic_to_shared(wg_raw) + 1023) & ~1023u;
}
__device__ __forceinline__ float *wg_smem_ptr(uint32_t base)
{
    extern __shared__ uint8_t wg_raw[];
    return (float *)(wg_raw + (base - (uint32_t)__cvta_generic_to_shared(wg_raw)));
}

/* The end of the kernel.  The consumers' accumulators (thread t's
 * accumulator i: see wg_mma) go to shared memory as a row-major f32 tile
 * (the ring's space: every stage has been read by now); then the whole
 * block walks that tile in rows of 8 columns, adds bias, applies the
 * activation and stores 16 bytes per step, so the stores are whole lines
 * and the activation's switch is decided once, outside the loop.  With K
 * split over a cluster (gridDim.z blocks), block z takes rows z, z + S, ...
 * of the tile and adds the parts of every block of the cluster, in the
 * order of the blocks (the same sum every run).  Every thread of the block
 * calls this (the barriers count them). */
/* One activation, fixed at compile time (0: none). */
template <int ACT> struct wg_act {
    __device__ __forceinline__ float operator()(float x) const { return ACT ? rlx_act_f32(ACT, x) : x; }
};

template <typename T, int BN, typename F>
__device__ __forceinline__ void wg_store_rows(const float *part, cg::cluster_group &cl, T *C, const T *bias, int64_t M,
                                              int64_t ldc, int64_t m0, int64_t n0, F act)
{
    constexpr int LD = wg_tile<BN>::ld, CHUNKS = BN / 8;
    const int S = (int)gridDim.z, z = (int)blockIdx.z;
    for (int i = threadIdx.x; i < (WG_BM / S) * CHUNKS; i += blockDim.x) {
        const int row = z + S * (i / CHUNKS), c8 = (i % CHUNKS) * 8;
        if (m0 + row >= M)
            continue;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int r = 0; r < S; r++) {
            const float4 *p = (const float4 *)((S > 1 ? cl.map_shared_rank(part, r) : part) + row * LD + c8);
            float4 a = p[0], b = p[1];
            v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w, v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
        }
        union {
            uint4 u;
            T t[8];
        } o;
#pragma unroll
        for (int j = 0; j < 8; j++)
            o.t[j] = cu_fromf<T>(act(bias ? v[j] + cu_tof<T>(bias[n0 + c8 + j]) : v[j]));
        *(uint4 *)(C + (m0 + row) * ldc + n0 + c8) = o.u;
    }
}

template <typename T, int BN>
__device__ __forceinline__ void wg_finish(const float (&d)[BN / 2], bool consumer, uint32_t base, T *C, const T *bias,
                                          int64_t M, int64_t ldc, int64_t m0, int64_t n0, int act)
{
    constexpr int LD = wg_tile<BN>::ld;
    float *part = wg_smem_ptr(base);
    cg::cluster_group cl = cg::this_cluster();
    __syncthreads(); /* every warpgroup's products have read their stages */
    if (consumer) {
        const int t = threadIdx.x, lane = t & 31;
        const int row = (t >> 7) * 64 + ((t >> 5) & 3) * 16 + (lane >> 2), col = (lane & 3) * 2;
#pragma unroll
        for (int q = 0; q < BN / 8; q++) {
            *(float2 *)(part + row * LD + col + q * 8) = make_float2(d[4 * q], d[4 * q + 1]);
            *(float2 *)(part + (row + 8) * LD + col + q * 8) = make_float2(d[4 * q + 2], d[4 * q + 3]);
        }
    }
    if (gridDim.z > 1)
        cl.sync();
    else
        __syncthreads();
    auto store = [&](auto f) { wg_store_rows<T, BN>(part, cl, C, bias, M, ldc, m0, n0, f); };
    switch (act) {
    case RLX_ACT_RELU: store(wg_act<RLX_ACT_RELU>()); break;
    case RLX_ACT_GELU: store(wg_act<RLX_ACT_GELU>()); break;
    case RLX_ACT_GELU_TANH: store(wg_act<RLX_ACT_GELU_TANH>()); break;
    case RLX_ACT_SILU: store(wg_act<RLX_ACT_SILU>()); break;
    default: store(wg_act<0>()); break;
    }
    if (gridDim.z > 1)
        cl.sync(); /* no block leaves while another reads its part */
}

/* ---- mbarriers and the tensor memory accelerator (ws_gemm) */
__device__ __forceinline__ void ws_bar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
/* The producer's arrival, announcing the bytes its copies will bring. */
__device__ __forceinline__ void ws_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void ws_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Waits until the barrier's phase of this parity has completed. */
__device__ __forceinline__ void ws_wait(uint32_t bar, int parity)
{
    asm volatile("{\n.reg .pred P1;\nWS_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra WS_DONE;\n"
                 "bra WS_WAIT;\n"
                 "WS_DONE:\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* One box of a 2-d tensor map (coordinates innermost first) into shared
 * memory at dst, completing bytes on bar. */
__device__ __forceinline__ void ws_tma(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
                 "[%2];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
/* B's stage: BN / 64 boxes of 64 columns x 64 rows, 8 KB apart (the
 * descriptor's leading byte offset). */
template <int BN>
__device__ __forceinline__ void ws_load_b(const CUtensorMap *map, uint32_t dst, uint32_t bar, int64_t n0, int64_t k0)
{
#pragma unroll
    for (int j = 0; j < BN / 64; j++)
        ws_tma(dst + j * 8192, map, bar, (int)(n0 + 64 * j), (int)k0);
}
#endif

/* One block of ws_gemm: the 128 x BN tile (blockIdx.y, blockIdx.x) of C over
 * K range blockIdx.z of gridDim.z.  Shared memory: STAGES stages of A
 * (128 x 64) and B (64 x BN), then per stage a "full" barrier (the
 * producer's arrival and the bytes of its copies) and an "empty" one (one
 * arrival per consumer warpgroup once its products have read the stage).
 * Use u of stage s is phase u of both barriers: consumers wait on full
 * with parity u & 1, the producer on empty with parity (u - 1) & 1. */
template <int BN> struct ws_size {
    static constexpr uint32_t b_bytes = WG_BK * BN * 2, stage = WG_A_BYTES + b_bytes;
};

template <typename T, int BN, int STAGES>
__global__ void __launch_bounds__(WS_THREADS, 1)
    ws_gemm(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, T *C, const T *bias,
            int64_t M, int64_t K, int64_t ldc, int act, int b_fixed)
{
    cu_prefetch_then_wait([&] {
#ifdef WG_DEVICE_OK
        constexpr uint32_t STAGE = ws_size<BN>::stage;
        /* the barriers (shared memory only), then, when B is fixed for the
         * run, the producer's copies of B for the first stages */
        const uint32_t base = wg_smem_base(), bars = base + STAGES * STAGE;
        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; s++) {
                ws_bar_init(bars + 8 * s, 1);
                ws_bar_init(bars + 8 * (STAGES + s), 2);
            }
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncthreads();
        if (b_fixed && threadIdx.x == WS_PRODUCER) {
            const int64_t kpart = K / gridDim.z, kb = blockIdx.z * kpart;
            const int nk = (int)(kpart / WG_BK);
            for (int s = 0; s < STAGES && s < nk; s++) {
                ws_expect(bars + 8 * s, STAGE);
                ws_load_b<BN>(&map_b, base + s * STAGE + WG_A_BYTES, bars + 8 * s, blockIdx.x * (int64_t)BN,
                              kb + s * WG_BK);
            }
        }
#endif
    });
#ifdef WG_DEVICE_OK
    constexpr uint32_t STAGE = ws_size<BN>::stage;
    const uint32_t base = wg_smem_base(), bars = base + STAGES * STAGE;
    const int64_t m0 = blockIdx.y * (int64_t)WG_BM, n0 = blockIdx.x * (int64_t)BN;
    const int64_t kpart = K / gridDim.z, kb = blockIdx.z * kpart;
    const int nk = (int)(kpart / WG_BK);
    const bool consumer = threadIdx.x < WS_PRODUCER;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        d[i] = 0.0f;

    if (!consumer) {
        /* the producer warp walks the ring together; its first lane issues */
        const bool leader = threadIdx.x == WS_PRODUCER;
        for (int kt = 0; kt < nk; kt++) {
            const int s = kt % STAGES;
            const uint32_t full = bars + 8 * s, st = base + s * STAGE;
            const bool early = b_fixed && kt < STAGES; /* B already on its way, its bytes announced */
            if (kt >= STAGES)
                ws_wait(bars + 8 * (STAGES + s), (kt / STAGES - 1) & 1);
            if (leader) {
                if (!early)
                    ws_expect(full, STAGE);
                ws_tma(st, &map_a, full, (int)(kb + kt * WG_BK), (int)m0);
                if (!early)
                    ws_load_b<BN>(&map_b, st + WG_A_BYTES, full, n0, kb + kt * WG_BK);
            }
            __syncwarp();
        }
    } else {
        const int wg = threadIdx.x >> 7;
        for (int kt = 0; kt < nk; kt++) {
            const int s = kt % STAGES;
            ws_wait(bars + 8 * s, (kt / STAGES) & 1);
            __syncwarp(); /* converged for the warpgroup instructions */
            const uint32_t sa = base + s * STAGE + wg * (64 * 128), sb = base + s * STAGE + WG_A_BYTES;
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int k16 = 0; k16 < WG_BK / 16; k16++)
                wg_mma<T, BN>(d, wg_desc(sa + k16 * 32, 16, 1024), wg_desc(sb + k16 * 2048, 8192, 1024));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            /* the products of step kt - 1 are done: its stage goes back */
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            if (kt > 0 && (threadIdx.x & 127) == 0)
                ws_arrive(bars + 8 * (STAGES + (kt - 1) % STAGES));
            __syncwarp();
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    wg_finish<T, BN>(d, consumer, base, C, bias, M, ldc, m0, n0, act);
#endif
}

/* ------------------------------------------------------------------ host */

bool rlx_cu_wg_available(void)
{
#ifdef RLX_HAVE_SM90A
    return rlx_cu_dev->wgmma;
#else
    return false; /* the build has no sm_90a machine code */
#endif
}

bool rlx_cu_wg_fits(rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, const void *A,
                    const void *B, const void *C)
{
    return (dt == RLX_F16 || dt == RLX_BF16) && M > 0 && N > 0 && K > 0 && N % 64 == 0 && K % WG_BK == 0 &&
           lda % 8 == 0 && ldb % 8 == 0 && ldc % 8 == 0 && cu_ptr_align(A) == 16 && cu_ptr_align(B) == 16 &&
           cu_ptr_align(C) == 16 && (M + WG_BM - 1) / WG_BM <= 65535 && M < INT32_MAX && N < INT32_MAX &&
           K < INT32_MAX && rlx_cu_wg_available();
}

/* The driver's tensor-map encoder, reached through the runtime (no link
 * to the driver library); NULL where the driver lacks it. */
static PFN_cuTensorMapEncodeTiled_v12000 find_tensor_map_encoder(void)
{
    void *p = NULL;
    cudaDriverEntryPointQueryResult q;
    bool ok =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess;
    cudaGetLastError();
    return ok ? (PFN_cuTensorMapEncodeTiled_v12000)p : NULL;
}

static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = find_tensor_map_encoder(); /* looked up once, thread-safe */
    return fn;
}

/* A row-major [rows, cols] matrix (leading dim ld) as boxes of
 * box_rows x 64 columns (128 bytes: the swizzle's width); rows past the
 * end read as zeros. */
static bool encode_map(unsigned char *out, rlx_dtype dt, const void *ptr, int64_t rows, int64_t cols, int64_t ld,
                       uint32_t box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
    if (!enc)
        return false;
    alignas(64) CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {64, box_rows}, step[2] = {1, 1};
    CUresult r = enc(&m, dt == RLX_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                     (void *)ptr, dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    memcpy(out, &m, sizeof m);
    return r == CUDA_SUCCESS;
}

int rlx_cu_wg_candidates(rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, const void *A,
                         const void *B, cu_wg_plan *out, int max)
{
    static const int widths[] = {64, 128}, splits[] = {1, 2, 4, 8}, stages[] = {4, 6};
    const int fb = rlx_cu_cfg.cuda_wgmma_bn, fs = rlx_cu_cfg.cuda_wgmma_split, fst = rlx_cu_cfg.cuda_wgmma_stages;
    cu_wg_plan p = {};
    if (!encode_map(p.maps[0], dt, A, M, K, lda, WG_BM) || !encode_map(p.maps[1], dt, B, K, N, ldb, 64))
        return 0;
    int n = 0;
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++) {
                int bn = widths[w], sp = splits[i];
                if (N % bn || K % (WG_BK * sp) || (fb >= 0 && fb != bn) || (fs >= 0 && fs != sp) ||
                    (fst >= 0 && fst != stages[j]))
                    continue;
                p.bn = bn;
                p.split = sp;
                p.stages = stages[j];
                if (n < max)
                    out[n++] = p;
            }
    return n;
}

/* Raises a kernel's shared-memory limit once per device. */
template <typename K> static void allow_smem(K kernel, size_t bytes, unsigned *done)
{
    if (rlx_cu_first_on_device(done))
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

template <typename T, int BN, int STAGES>
static void ws_launch_t(const cu_wg_plan *p, int64_t M, int64_t N, int64_t K, int64_t ldc, void *C, const void *bias,
                        int act, bool b_fixed)
{
    static_assert(WG_BM * wg_tile<BN>::ld * 4 <= STAGES * ws_size<BN>::stage, "the staged tile fits in the ring");
    size_t smem = (size_t)STAGES * (ws_size<BN>::stage + 16) + 1024;
    static unsigned attr_set; /* a bit per device */
    allow_smem(ws_gemm<T, BN, STAGES>, smem, &attr_set);
    alignas(64) CUtensorMap ma, mb;
    memcpy(&ma, p->maps[0], sizeof ma);
    memcpy(&mb, p->maps[1], sizeof mb);
    dim3 grid((unsigned)(N / BN), (unsigned)((M + WG_BM - 1) / WG_BM), (unsigned)p->split);
    cu_launch_cluster(ws_gemm<T, BN, STAGES>, grid, dim3(WS_THREADS), smem, p->split, ma, mb, (T *)C, (const T *)bias,
                      M, K, ldc, act, (int)b_fixed);
}

template <typename T>
static void launch_t(const cu_wg_plan *p, int64_t M, int64_t N, int64_t K, int64_t ldc, void *C, const void *bias,
                     int act, bool b_fixed)
{
    bool six = p->stages == 6;
    if (p->bn == 128)
        (six ? ws_launch_t<T, 128, 6> : ws_launch_t<T, 128, 4>)(p, M, N, K, ldc, C, bias, act, b_fixed);
    else
        (six ? ws_launch_t<T, 64, 6> : ws_launch_t<T, 64, 4>)(p, M, N, K, ldc, C, bias, act, b_fixed);
}

void rlx_cu_wg_launch(const cu_wg_plan *p, rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t ldc, void *C,
                      const void *bias, int act, bool b_fixed)
{
    if (dt == RLX_F16)
        launch_t<__half>(p, M, N, K, ldc, C, bias, act, b_fixed);
    else
        launch_t<__nv_bfloat16>(p, M, N, K, ldc, C, bias, act, b_fixed);
}
