/* k_proj.cu - products of a few rows by a weight stored [N, K] (a decode
 * step's projections), bound by reading the weight: the `projection` fused
 * op (an RMS norm before the product, a gated unit or a residual add
 * after it) and, through rlx_cu_rows_launch, the few-row matmuls of
 * k_matmul.cu and qmatmuls of k_quant.cu.  One kernel does all of it for
 * a float weight, and qproj_kernel (below) for a quantized one:
 *
 *   - the weight rows a block reads are asked into L2 before it waits on
 *     the kernel ahead (when no kernel of the run writes them), so that
 *     read overlaps the small kernels before the product;
 *   - with the RMS norm, each block normalises the rows into shared memory
 *     first (they are a few KB; the weight is MBs);
 *   - each output column is a warp or four, reading 16-byte words of the
 *     weight row with all their loads in flight; with the gated unit a
 *     column reads two weight rows (gate n and up n of the joined
 *     product) and stores act(gate) * up;
 *   - the epilogue adds the bias, applies the activation, adds the
 *     residual, and rounds once. */
#include "backends/cuda/cuda_proj.h"
#include "backends/cuda/cuda_quant.h"

extern "C" {
#include "quant/quant.h"
}
#include "quant/quant_units.h"

#define PROJ_WARPS 8

/* One load, through the read-only cache when RO (global memory that no
 * kernel of the run writes: the weight). */
template <bool RO, typename V> __device__ __forceinline__ V ld1(const V *p)
{
    if constexpr (RO)
        return __ldg(p);
    else
        return *p;
}

/* Eight consecutive elements as floats; p 16-byte aligned when vec. */
template <bool RO, typename T> __device__ __forceinline__ void ld8(const T *p, float (&f)[8], bool vec)
{
    if (!vec) {
#pragma unroll
        for (int e = 0; e < 8; e++)
            f[e] = cu_tof<T>(ld1<RO>(p + e));
    } else if constexpr (sizeof(T) == 4) {
        const float4 a = ld1<RO>((const float4 *)p), b = ld1<RO>((const float4 *)p + 1);
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
        const uint4 v = ld1<RO>((const uint4 *)p);
        const T *h = (const T *)&v;
#pragma unroll
        for (int e = 0; e < 8; e++)
            f[e] = cu_tof<T>(h[e]);
    }
}

/* v rounded to T and back. */
template <typename T> __device__ __forceinline__ float cu_rnd(float v) { return cu_tof<T>(cu_fromf<T>(v)); }

/* 1 / rms of each of x's M rows, into inv (shared memory). */
template <typename T, int M> __device__ void proj_rms_inv(const cu_proj_args &a, float *inv)
{
    __shared__ float red[PROJ_WARPS][M];
    const T *x = (const T *)a.x;
    const int64_t K = a.K, words = K / 8;
    float ss[M];
#pragma unroll
    for (int m = 0; m < M; m++)
        ss[m] = 0.0f;
    for (int64_t c = threadIdx.x; c < words; c += blockDim.x)
#pragma unroll
        for (int m = 0; m < M; m++) {
            float v[8];
            ld8<false>(x + m * K + 8 * c, v, a.vec);
#pragma unroll
            for (int e = 0; e < 8; e++)
                ss[m] += v[e] * v[e];
        }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < M; m++) {
        ss[m] = cu_warp_sum(ss[m]);
        if (lane == 0)
            red[warp][m] = ss[m];
    }
    __syncthreads();
    if (threadIdx.x < M) {
        float t = 0.0f;
        for (int w = 0; w < PROJ_WARPS; w++)
            t += red[w][threadIdx.x];
        inv[threadIdx.x] = rsqrtf(t / (float)K + a.eps);
    }
    __syncthreads();
}

/* x's M rows RMS-normalised (times gamma) into st, rounded to T as the
 * norm's own result would be. */
template <typename T, int M> __device__ void proj_stage_rms(const cu_proj_args &a, T *st)
{
    __shared__ float inv[M];
    proj_rms_inv<T, M>(a, inv);
    const T *x = (const T *)a.x, *gm = (const T *)a.gamma;
    const int64_t K = a.K, words = K / 8;
    for (int64_t c = threadIdx.x; c < words; c += blockDim.x) {
        float g[8];
        ld8<false>(gm + 8 * c, g, a.vec);
#pragma unroll
        for (int m = 0; m < M; m++) {
            float v[8];
            ld8<false>(x + m * K + 8 * c, v, a.vec);
#pragma unroll
            for (int e = 0; e < 8; e++)
                st[m * K + 8 * c + e] = cu_fromf<T>(v[e] * inv[m] * g[e]);
        }
    }
    __syncthreads();
}

/* The column's sums stored: the epilogue (bias, activation or gated unit,
 * residual), rounded where the unfused parts would store. */
template <typename T, int M, int G>
__device__ __forceinline__ void proj_store(const cu_proj_args &a, const float (&acc)[G * M], int64_t n, int64_t cols)
{
    const float b = a.bias ? cu_tof<T>(((const T *)a.bias)[n]) : 0.0f;
#pragma unroll
    for (int m = 0; m < M; m++) {
        /* rounded where the parts would store: the product, the gate */
        float v;
        if (G == 2)
            v = cu_rnd<T>(rlx_act_f32(a.act, cu_rnd<T>(acc[m]))) * cu_rnd<T>(acc[M + m]);
        else
            v = rlx_act_f32(a.act, acc[m] + b);
        if (a.res)
            v = cu_rnd<T>(v) + cu_tof<T>(((const T *)a.res)[m * cols + n]);
        ((T *)a.y)[m * cols + n] = cu_fromf<T>(v);
    }
}

/* y [M, N / G] from x [M, K] and w [N, K]: G = 2 for the gated unit (the
 * column's gate row n and up row n + N / 2), else 1.  WPC warps per
 * column. */
template <typename T, int M, int WPC, int G>
__global__ void __launch_bounds__(PROJ_WARPS * 32) proj_kernel(const cu_proj_args a)
{
    cu_prefetch_then_wait([&] {
        const int64_t cols = a.N / G, n0 = (int64_t)blockIdx.x * (PROJ_WARPS / WPC), rowb = a.K * (int64_t)sizeof(T);
        if (a.w_fixed && threadIdx.x == 0)
            for (int g = 0; g < G; g++)
                cu_prefetch_l2(a.w, (g * cols + n0) * rowb, (g * cols + n0 + PROJ_WARPS / WPC) * rowb, a.N * rowb);
    });
    extern __shared__ uint4 proj_rows[];
    const T *xs = (const T *)a.x;
    if (a.pre_rms) {
        proj_stage_rms<T, M>(a, (T *)proj_rows);
        xs = (const T *)proj_rows;
    }
    __shared__ float part[PROJ_WARPS][G * M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = warp % WPC;
    const int64_t K = a.K, cols = a.N / G, n = (int64_t)blockIdx.x * (PROJ_WARPS / WPC) + warp / WPC;
    float acc[G * M];
#pragma unroll
    for (int i = 0; i < G * M; i++)
        acc[i] = 0.0f;
    if (n < cols) {
        const T *w = (const T *)a.w;
        const int64_t words = K / 8;
#pragma unroll 4
        for (int64_t c = (int64_t)sub * 32 + lane; c < words; c += 32 * WPC) {
            float wf[G][8];
#pragma unroll
            for (int g = 0; g < G; g++)
                ld8<true>(w + (g * cols + n) * K + 8 * c, wf[g], a.vec);
#pragma unroll
            for (int m = 0; m < M; m++) {
                float xv[8];
                ld8<false>(xs + m * K + 8 * c, xv, a.vec || a.pre_rms);
#pragma unroll
                for (int g = 0; g < G; g++)
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[g * M + m] += wf[g][e] * xv[e];
            }
        }
    }
    if (!cu_mv_reduce<G * M, WPC>(acc, part, warp, lane, sub))
        return;
    if (lane == 0 && n < cols)
        proj_store<T, M, G>(a, acc, n, cols);
}

/* ------------------------------------------------- quantized weights */

/* Copies bytes [src, src + len) to buf (16-byte aligned) at the same offset
 * within 16 bytes, so that every field keeps its alignment: the warp reads
 * whole 16-byte words, and byte by byte the words that cross lo or hi (the
 * weight's ends).  Returns where src lies in buf. */
__device__ __forceinline__ const uint8_t *q_stage(const uint8_t *src, int len, const uint8_t *lo, const uint8_t *hi,
                                                  uint4 *buf, int lane)
{
    const uintptr_t s = (uintptr_t)src, a = s & ~(uintptr_t)15;
    const int skew = (int)(s - a), nw = (skew + len + 15) >> 4;
    for (int i = lane; i < nw; i += 32) {
        const uint8_t *p = (const uint8_t *)(a + 16 * (uintptr_t)i);
        if (p >= lo && p + 16 <= hi) {
            buf[i] = __ldg((const uint4 *)p);
        } else {
            uint8_t *d = (uint8_t *)(buf + i);
            for (int k = 0; k < 16; k++)
                d[k] = p + k >= lo && p + k < hi ? __ldg(p + k) : 0;
        }
    }
    return (const uint8_t *)buf + skew;
}

/* x's M rows (RMS-normalised when pre_rms, rounded to T as the norm
 * stores them) as 8-bit levels per 32 elements: xq [M, K], the scale of
 * each 32 in xd (max |x| / 127; NaN where the 32 hold a NaN or an
 * infinity) and the sum of each 16 levels in xs (for the weights' mins). */
template <typename T, int M> __device__ void qproj_stage_x(const cu_proj_args &a, int8_t *xq, float *xd, int *xs)
{
    __shared__ float inv[M];
    if (a.pre_rms)
        proj_rms_inv<T, M>(a, inv);
    const T *x = (const T *)a.x, *gm = (const T *)a.gamma;
    const int64_t K = a.K, groups = K / 32;
    for (int64_t i = threadIdx.x; i < M * groups; i += blockDim.x) {
        const int64_t m = i / groups, g = i - m * groups;
        float v[32], amax = 0.0f;
        bool bad = false;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            float f[8];
            ld8<false>(x + m * K + 32 * g + 8 * c, f, a.vec);
            if (a.pre_rms) {
                float gg[8];
                ld8<false>(gm + 32 * g + 8 * c, gg, a.vec);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    f[e] = cu_rnd<T>(f[e] * inv[m] * gg[e]);
            }
#pragma unroll
            for (int e = 0; e < 8; e++) {
                v[8 * c + e] = f[e];
                amax = fmaxf(amax, fabsf(f[e]));
                bad |= !isfinite(f[e]);
            }
        }
        const float id = amax > 0.0f && !bad ? 127.0f / amax : 0.0f;
        int words[8], sum[2] = {0, 0};
#pragma unroll
        for (int w = 0; w < 8; w++) {
            unsigned packed = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int q = __float2int_rn(v[4 * w + k] * id);
                sum[w / 4] += q;
                packed |= (unsigned)(q & 255) << (8 * k);
            }
            words[w] = (int)packed;
        }
        int4 *dst = (int4 *)(xq + m * K + 32 * g);
        dst[0] = make_int4(words[0], words[1], words[2], words[3]);
        dst[1] = make_int4(words[4], words[5], words[6], words[7]);
        xd[m * groups + g] = bad ? __int_as_float(0x7fc00000) : amax / 127.0f;
        xs[2 * (m * groups + g)] = sum[0];
        xs[2 * (m * groups + g) + 1] = sum[1];
    }
    __syncthreads();
}

/* One half of a unit (16 weights) times 16 activations. */
template <bool MIN>
__device__ __forceinline__ float qhalf_i8(const uint32_t (&q)[4], float d, float m, const int8_t *xq, float xd, int xs)
{
    const int4 xv = *(const int4 *)xq;
    int s = __dp4a((int)q[0], xv.x, 0);
    s = __dp4a((int)q[1], xv.y, s);
    s = __dp4a((int)q[2], xv.z, s);
    s = __dp4a((int)q[3], xv.w, s);
    float v = d * (float)s;
    if (MIN)
        v -= m * (float)xs;
    return xd * v;
}

template <bool MIN> __device__ __forceinline__ float qhalf_f32(const uint32_t (&q)[4], float d, float m, const float *x)
{
    float s = 0.0f, t = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float4 xv = *(const float4 *)(x + 4 * i);
        const float xe[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s += (float)(int8_t)(q[i] >> (8 * k)) * xe[k];
            if (MIN)
                t += xe[k];
        }
    }
    return MIN ? d * s - m * t : d * s;
}

/* proj_kernel for a weight of ggml type QT: a lane takes a unit of 32
 * weights (quant/quant_units.h) a step, the warp's 32 units staged first
 * in shared memory in 16-byte words (a unit's fields lie 18 to 292 bytes
 * apart, which lanes reading their own would fetch in many narrow loads).
 * 16-bit activations are staged as 8-bit levels and multiplied as
 * integers (__dp4a), f32 ones read as they are (normalised into shared
 * memory with pre_rms). */
template <typename T, int QT, int M, int WPC, int G>
__global__ void __launch_bounds__(PROJ_WARPS * 32) qproj_kernel(const cu_proj_args a)
{
    cu_prefetch_then_wait([&] {
        const int64_t cols = a.N / G, n0 = (int64_t)blockIdx.x * (PROJ_WARPS / WPC);
        if (a.w_fixed && threadIdx.x == 0)
            for (int g = 0; g < G; g++)
                cu_prefetch_l2(a.w, (g * cols + n0) * a.rb, (g * cols + n0 + PROJ_WARPS / WPC) * a.rb, a.N * a.rb);
    });
    constexpr int UPB = RLX_QU_PER_BLOCK(QT), BB = cu_q_block_bytes(QT), SPAN = 32 / UPB * BB;
    constexpr bool I8 = sizeof(T) == 2, MIN = RLX_QU_HAS_MIN(QT);
    const int64_t cols = a.N / G, n0 = (int64_t)blockIdx.x * (PROJ_WARPS / WPC);
    extern __shared__ uint4 proj_rows[];
    __shared__ uint4 staged[PROJ_WARPS][G][(SPAN + 31) / 16];
    __shared__ float part[PROJ_WARPS][G * M];
    const int64_t K = a.K, units = K / 32;
    int8_t *xq = (int8_t *)proj_rows;
    float *xd = (float *)(xq + M * K);
    int *xs = (int *)(xd + M * (K / 32));
    const float *xf = (const float *)a.x;
    if constexpr (I8) {
        qproj_stage_x<T, M>(a, xq, xd, xs);
    } else if (a.pre_rms) {
        proj_stage_rms<T, M>(a, (T *)proj_rows);
        xf = (const float *)proj_rows;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = warp % WPC;
    const uint8_t *w = (const uint8_t *)a.w, *w_end = w + a.N * a.rb;
    /* the block's groups of columns, the activations staged once for all;
     * the next group's rows are asked into L2 as this one's are read */
    const int64_t step = (int64_t)gridDim.x * (PROJ_WARPS / WPC);
    for (int64_t c0 = n0; c0 < cols; c0 += step) {
        if (a.w_fixed && threadIdx.x == 0 && c0 + step < cols)
            for (int g = 0; g < G; g++)
                cu_prefetch_l2(a.w, (g * cols + c0 + step) * a.rb, (g * cols + c0 + step + PROJ_WARPS / WPC) * a.rb,
                               a.N * a.rb);
        const int64_t n = c0 + warp / WPC;
        float acc[G * M];
#pragma unroll
        for (int i = 0; i < G * M; i++)
            acc[i] = 0.0f;
        if (n < cols) {
            for (int64_t u0 = (int64_t)sub * 32; u0 < units; u0 += 32 * WPC) {
                const int nu = units - u0 < 32 ? (int)(units - u0) : 32;
                const uint8_t *sp[G];
#pragma unroll
                for (int g = 0; g < G; g++)
                    sp[g] = q_stage(w + (g * cols + n) * a.rb + u0 / UPB * BB, nu / UPB * BB, w, w_end, staged[warp][g],
                                    lane);
                __syncwarp();
                if (lane < nu) {
                    const int64_t e0 = (u0 + lane) / UPB * (32 * UPB); /* the unit's block's first element */
#pragma unroll
                    for (int g = 0; g < G; g++) {
                        rlx_qunit q;
                        rlx_qunit_read(QT, sp[g] + lane / UPB * BB, lane % UPB, &q);
#pragma unroll
                        for (int m = 0; m < M; m++)
#pragma unroll
                            for (int h = 0; h < 2; h++) {
                                const int64_t e = e0 + q.e[h];
                                if constexpr (I8)
                                    acc[g * M + m] +=
                                        qhalf_i8<MIN>(q.q[h], q.d[h], q.m[h], xq + m * K + e, xd[m * (K / 32) + e / 32],
                                                      xs[m * (K / 16) + e / 16]);
                                else
                                    acc[g * M + m] += qhalf_f32<MIN>(q.q[h], q.d[h], q.m[h], xf + m * K + e);
                            }
                    }
                }
                __syncwarp();
            }
        }
        if (cu_mv_reduce<G * M, WPC>(acc, part, warp, lane, sub) && lane == 0 && n < cols)
            proj_store<T, M, G>(a, acc, n, cols);
        if (WPC > 1)
            __syncthreads(); /* part is written again by the next group */
    }
}

/* Blocks of a quantized launch past which a block takes several groups of
 * columns (the output head's 150,000 rows: its activations staged once a
 * block rather than once a group). */
#define QPROJ_MAX_BLOCKS 1024

/* ------------------------------------------------------------ launches */

/* For activations of es bytes. */
static size_t rows_smem(size_t es, int64_t M, int64_t K, bool pre_rms, bool quant)
{
    if (quant && es == 2) /* 8-bit levels, a scale a 32 and a sum a 16 */
        return (size_t)(M * K) + (size_t)(M * (K / 32)) * 4 + (size_t)(M * (K / 16)) * 4;
    return pre_rms ? (size_t)(M * K) * es : 0;
}

size_t rlx_cu_rows_smem(rlx_dtype dt, int64_t M, int64_t K, bool pre_rms, bool quant)
{
    return rows_smem(rlx_dtype_size(dt), M, K, pre_rms, quant);
}

/* Launches kernel on cols columns, WPC warps a column, in at most
 * max_blocks blocks (a kernel that loops over groups of columns). */
template <int WPC, typename Kern>
static void proj_launch_kernel(Kern kernel, int64_t cols, size_t smem, const cu_proj_args &a, int64_t max_blocks)
{
    if (smem > 16 * 1024) /* with the static arrays, past the default 48 KB */
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const int64_t blocks = (cols + PROJ_WARPS / WPC - 1) / (PROJ_WARPS / WPC);
    cu_launch(kernel, (unsigned)(blocks < max_blocks ? blocks : max_blocks), PROJ_WARPS * 32, smem, a);
}

/* Four warps per column where columns alone leave the card short of warps. */
#define PROJ_WIDE(a, G) ((a).N / (G) * (G) >= 4096)

template <typename T, int M, int G> static void proj_launch_mg(const cu_proj_args &a)
{
    const size_t smem = rows_smem(sizeof(T), M, a.K, a.pre_rms, false);
    if (PROJ_WIDE(a, G))
        proj_launch_kernel<1>(proj_kernel<T, M, 1, G>, a.N / G, smem, a, INT_MAX);
    else
        proj_launch_kernel<4>(proj_kernel<T, M, 4, G>, a.N / G, smem, a, INT_MAX);
}

template <typename T, int G> static void proj_launch_g(const cu_proj_args &a)
{
    switch (a.M) {
    case 1: proj_launch_mg<T, 1, G>(a); break;
    case 2: proj_launch_mg<T, 2, G>(a); break;
    case 3: proj_launch_mg<T, 3, G>(a); break;
    case 4: proj_launch_mg<T, 4, G>(a); break;
    case 5: proj_launch_mg<T, 5, G>(a); break;
    case 6: proj_launch_mg<T, 6, G>(a); break;
    case 7: proj_launch_mg<T, 7, G>(a); break;
    default: proj_launch_mg<T, 8, G>(a); break;
    }
}

template <typename T, int QT, int M, int G> static void qproj_launch_mg(const cu_proj_args &a)
{
    const size_t smem = rows_smem(sizeof(T), M, a.K, a.pre_rms, true);
    if (PROJ_WIDE(a, G))
        proj_launch_kernel<1>(qproj_kernel<T, QT, M, 1, G>, a.N / G, smem, a, QPROJ_MAX_BLOCKS);
    else
        proj_launch_kernel<4>(qproj_kernel<T, QT, M, 4, G>, a.N / G, smem, a, QPROJ_MAX_BLOCKS);
}

/* The rows in launches of 8, 4, 2 and 1 (fewer kernels to build). */
template <typename T, int QT, int G> static void qproj_launch_g(cu_proj_args a)
{
    const size_t es = sizeof(T);
    const int64_t cols = a.N / G, rows = a.M;
    for (int64_t done = 0; done < rows;) {
        const int64_t left = rows - done, mm = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        cu_proj_args p = a;
        p.x = (const char *)a.x + (size_t)(done * a.K) * es;
        p.y = (char *)a.y + (size_t)(done * cols) * es;
        if (a.res)
            p.res = (const char *)a.res + (size_t)(done * cols) * es;
        p.M = mm;
        switch (mm) {
        case 8: qproj_launch_mg<T, QT, 8, G>(p); break;
        case 4: qproj_launch_mg<T, QT, 4, G>(p); break;
        case 2: qproj_launch_mg<T, QT, 2, G>(p); break;
        default: qproj_launch_mg<T, QT, 1, G>(p); break;
        }
        done += mm;
    }
}

bool rlx_cu_rows_launch(rlx_dtype dt, cu_proj_args a)
{
    a.vec = ((uintptr_t)a.x | (uintptr_t)a.w | (uintptr_t)a.gamma) % 16 == 0 && a.K % 8 == 0;
    if (a.quant) {
        if ((uintptr_t)a.w % 16)
            return false;
        CU_FLOAT_DISPATCH(dt, T, Q_TYPE_DISPATCH(a.quant, QT, {
                              if (a.glu)
                                  qproj_launch_g<T, QT, 2>(a);
                              else
                                  qproj_launch_g<T, QT, 1>(a);
                          }));
        return true;
    }
    CU_FLOAT_DISPATCH(dt, T, {
        if (a.glu)
            proj_launch_g<T, 2>(a);
        else
            proj_launch_g<T, 1>(a);
    });
    return true;
}

/* ----------------------------------------------------- the fused op */

/* A decode step's few rows by a weight the kernel reads in 16-byte words,
 * or by a quantized one of a type the CPU computes with. */
static bool proj_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (n->dtype != RLX_F32 && n->dtype != RLX_F16 && n->dtype != RLX_BF16)
        return false;
    const rlx_node_data *x = &g->nodes[n->in[0]];
    const int64_t M = rlx_projection_rows(x), K = x->shape.dims[x->shape.ndim - 1];
    const bool quant = n->attrs.proj.quant != 0;
    if (M < 1 || M > (quant ? CU_PROJ_MAX_ROWS : cu_proj_float_rows()) || K < 8 || K % 8 ||
        (quant && !rlx_qtype_supported(n->attrs.proj.quant)))
        return false;
    return rlx_cu_rows_smem(n->dtype, M, K, n->attrs.proj.pre == RLX_PROJ_RMS_NORM, quant) <= CU_PROJ_MAX_SMEM;
}

static rlx_status k_projection(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node;
    cu_proj_args a;
    memset(&a, 0, sizeof a);
    int k = 2;
    a.x = t->in[0];
    a.w = t->in[1];
    a.pre_rms = n->attrs.proj.pre == RLX_PROJ_RMS_NORM;
    if (a.pre_rms)
        a.gamma = t->in[k++];
    if (n->attrs.proj.has_res)
        a.res = t->in[k];
    a.y = t->out;
    a.M = rlx_projection_rows(t->in_node[0]);
    a.N = t->in_node[1]->shape.dims[0];
    a.K = t->in_node[0]->shape.dims[t->in_node[0]->shape.ndim - 1];
    a.eps = (float)n->attrs.proj.eps;
    a.glu = n->attrs.proj.glu != RLX_ACT_NONE;
    a.act = a.glu ? n->attrs.proj.glu : RLX_ACT_NONE;
    a.w_fixed = (t->in_fixed >> 1) & 1;
    a.quant = n->attrs.proj.quant;
    a.rb = t->in_node[1]->shape.dims[1];
    if (a.M == 0 || a.N == 0)
        return RLX_OK;
    if (!rlx_cu_rows_launch(n->dtype, a))
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "projection: the quantized weight at %p is not 16-byte aligned",
                           a.w);
    return rlx_cu_check(t, "projection launch");
}

extern "C" void rlx_cuda_register_proj(cu_kernel *tab)
{
    tab[RLX_OP_PROJECTION] = (cu_kernel){k_projection, NULL, proj_ok, NULL, NULL};
}
