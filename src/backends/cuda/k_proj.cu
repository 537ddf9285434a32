/* k_proj.cu - products of a few rows by a weight stored [N, K] (a decode
 * step's projections), bound by reading the weight: the `projection` fused
 * op (an RMS norm before the product, a gated unit or a residual add
 * after it) and, through rlx_cu_rows_launch, the few-row matmuls of
 * k_matmul.cu.  One kernel does all of it:
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

/* x's M rows RMS-normalised (times gamma) into st, rounded to T as the
 * norm's own result would be. */
template <typename T, int M> __device__ void proj_stage_rms(const cu_proj_args &a, T *st)
{
    __shared__ float red[PROJ_WARPS][M];
    const T *x = (const T *)a.x, *gm = (const T *)a.gamma;
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
    float inv[M];
#pragma unroll
    for (int m = 0; m < M; m++) {
        float t = 0.0f;
        for (int w = 0; w < PROJ_WARPS; w++)
            t += red[w][m];
        inv[m] = rsqrtf(t / (float)K + a.eps);
    }
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
    if (lane == 0 && n < cols) {
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
}

/* Shared memory of the normalised rows. */
static size_t proj_smem(const cu_proj_args *a, size_t es) { return a->pre_rms ? (size_t)(a->M * a->K) * es : 0; }

template <typename T, int M, int G> static void proj_launch_mg(const cu_proj_args &a)
{
    const int64_t cols = a.N / G;
    const size_t smem = proj_smem(&a, sizeof(T));
    /* four warps per column where columns alone leave the card short of warps */
    if (cols * G >= 4096) {
        if (smem > 40 * 1024) /* past the default 48 KB with the static arrays */
            cudaFuncSetAttribute(proj_kernel<T, M, 1, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        cu_launch(proj_kernel<T, M, 1, G>, (unsigned)((cols + PROJ_WARPS - 1) / PROJ_WARPS), PROJ_WARPS * 32, smem, a);
    } else {
        if (smem > 40 * 1024)
            cudaFuncSetAttribute(proj_kernel<T, M, 4, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        cu_launch(proj_kernel<T, M, 4, G>, (unsigned)((cols + PROJ_WARPS / 4 - 1) / (PROJ_WARPS / 4)), PROJ_WARPS * 32,
                  smem, a);
    }
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

void rlx_cu_rows_launch(rlx_dtype dt, cu_proj_args a)
{
    a.vec = ((uintptr_t)a.x | (uintptr_t)a.w | (uintptr_t)a.gamma) % 16 == 0 && a.K % 8 == 0;
    CU_FLOAT_DISPATCH(dt, T, {
        if (a.glu)
            proj_launch_g<T, 2>(a);
        else
            proj_launch_g<T, 1>(a);
    });
}

/* ----------------------------------------------------- the fused op */

/* A decode step's few rows by a weight the kernel reads in 16-byte words. */
static bool proj_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (n->dtype != RLX_F32 && n->dtype != RLX_F16 && n->dtype != RLX_BF16)
        return false;
    const rlx_node_data *w = &g->nodes[n->in[1]];
    const int64_t M = rlx_projection_rows(&g->nodes[n->in[0]]), K = w->shape.dims[1];
    if (M < 1 || M > CU_PROJ_MAX_ROWS || K < 8 || K % 8)
        return false;
    return n->attrs.proj.pre != RLX_PROJ_RMS_NORM || (size_t)(M * K) * rlx_dtype_size(n->dtype) <= CU_PROJ_MAX_SMEM;
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
    a.K = t->in_node[1]->shape.dims[1];
    a.eps = (float)n->attrs.proj.eps;
    a.glu = n->attrs.proj.glu != RLX_ACT_NONE;
    a.act = a.glu ? n->attrs.proj.glu : RLX_ACT_NONE;
    a.w_fixed = (t->in_fixed >> 1) & 1;
    if (a.M == 0 || a.N == 0)
        return RLX_OK;
    rlx_cu_rows_launch(n->dtype, a);
    return rlx_cu_check(t, "projection launch");
}

extern "C" void rlx_cuda_register_proj(cu_kernel *tab)
{
    tab[RLX_OP_PROJECTION] = (cu_kernel){k_projection, NULL, proj_ok, NULL, NULL};
}
