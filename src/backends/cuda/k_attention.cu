/* k_attention.cu - fused scaled-dot-product attention, flash style: keys
 * and values stream through shared memory in tiles and a running max, sum
 * and output accumulator are kept per query row (online softmax), so the
 * score matrix is never materialised.  Causal masking, a bool or additive
 * mask broadcast to [B, H, S, T], grouped-query heads (H a multiple of
 * Hkv), and strided views (cuda_attention.h) so the fused attention block
 * reads q/k/v straight out of its projection buffer.
 *
 * f16/bf16 with D == Dv in {32, 64, 128} run on tensor cores (mma.sync
 * m16n8k16, f32 accumulation); everything else (f32 above all: it stays
 * real f32) on the CUDA cores. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_attn_tc.h"

/* Block -> batch, head, kv head and first query row, in 32-bit arithmetic
 * (a 64-bit division costs dozens of instructions; the host keeps grids
 * under 2^31 blocks).  rows: query rows per block, a compile-time constant
 * at every call. */
typedef struct attn_pos {
    int64_t b, h, hk, q0;
} attn_pos;

__device__ __forceinline__ attn_pos attn_pos_of(const cu_attn &p, int rows, unsigned blk)
{
    const unsigned nq = (unsigned)((p.S + rows - 1) / rows), H = (unsigned)p.H;
    const unsigned bh = blk / nq, h = bh % H, qb = blk % nq;
    attn_pos r;
    r.b = bh / H;
    r.h = h;
    r.hk = h / (H / (unsigned)p.Hk);
    /* causal: the last query rows (the most keys) first, so that the
     * heaviest blocks are not the ones left for a last partial wave */
    r.q0 = (int64_t)(p.causal ? nq - 1 - qb : qb) * rows;
    return r;
}

/* ------------------------------------------------- CUDA cores, any dims */

#define TK 32 /* keys per tile */
#define QPB 8 /* query rows (warps) per block */

/* One warp per query row (head dims up to 256). */
template <typename T, int DVL> __global__ void __launch_bounds__(QPB * 32) flash_attn(cu_attn p)
{
    cu_grid_wait();
    extern __shared__ float sh[];
    const int D = (int)p.D, Dv = (int)p.Dv;
    float *ks = sh;                /* [TK][D + 1] */
    float *vs = ks + TK * (D + 1); /* [TK][Dv] */
    float *qs = vs + TK * Dv;      /* [QPB][D] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const attn_pos ps = attn_pos_of(p, QPB, blockIdx.x);
    const int64_t b = ps.b, h = ps.h, hk = ps.hk, s0 = ps.q0, s = s0 + warp;
    const bool active = s < p.S;
    const T *kb = (const T *)p.k + b * p.kst[0] + hk * p.kst[1];
    const T *vb = (const T *)p.v + b * p.vst[0] + hk * p.vst[1];
    float *qw = qs + warp * D;
    if (active) {
        const T *qr = (const T *)p.q + b * p.qst[0] + h * p.qst[1] + s * p.qst[2];
        for (int d = lane; d < D; d += 32)
            qw[d] = cu_tof<T>(qr[d]) * p.scale;
    }
    float acc[DVL];
#pragma unroll
    for (int r = 0; r < DVL; r++)
        acc[r] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int64_t shift = attn_shift(p, b);
    int64_t t_end = p.T;
    if (p.causal) {
        int64_t s_last = s0 + QPB - 1 < p.S - 1 ? s0 + QPB - 1 : p.S - 1;
        int64_t lim = s_last + shift + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    for (int64_t t0 = 0; t0 < t_end; t0 += TK) {
        __syncthreads();
        for (int i = threadIdx.x; i < TK * D; i += blockDim.x) {
            int j = i / D, d = i % D;
            ks[j * (D + 1) + d] = t0 + j < p.T ? cu_tof<T>(kb[(t0 + j) * p.kst[2] + d]) : 0.0f;
        }
        for (int i = threadIdx.x; i < TK * Dv; i += blockDim.x) {
            int j = i / Dv;
            vs[i] = t0 + j < p.T ? cu_tof<T>(vb[(t0 + j) * p.vst[2] + i % Dv]) : 0.0f;
        }
        __syncthreads();
        if (!active)
            continue;
        int64_t t = t0 + lane;
        float sc = 0.0f;
        const float *kr = ks + lane * (D + 1);
        for (int d = 0; d < D; d++)
            sc += qw[d] * kr[d];
        bool visible = t < p.T && (!p.causal || t <= s + shift);
        if (visible && p.mask) {
            int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
            if (p.mask_dt == RLX_BOOL)
                visible = ((const unsigned char *)p.mask)[mo] != 0;
            else
                sc += cu_tof<T>(((const T *)p.mask)[mo]);
        }
        if (!visible)
            sc = -INFINITY;
        float mt = cu_warp_max(sc);
        float mn = fmaxf(m, mt);
        if (mn == -INFINITY)
            continue; /* every key of this tile masked so far */
        float corr = __expf(m - mn);
        float pr = sc == -INFINITY ? 0.0f : __expf(sc - mn);
        l = l * corr + cu_warp_sum(pr);
        m = mn;
#pragma unroll
        for (int r = 0; r < DVL; r++)
            acc[r] *= corr;
        int jn = (int)(p.T - t0 < TK ? p.T - t0 : TK);
        for (int j = 0; j < jn; j++) {
            float pj = __shfl_sync(0xffffffffu, pr, j);
            const float *vr = vs + j * Dv;
#pragma unroll
            for (int r = 0; r < DVL; r++) {
                int e = lane + 32 * r;
                if (e < Dv)
                    acc[r] += pj * vr[e];
            }
        }
    }
    if (!active)
        return;
    float inv = l > 0 ? 1.0f / l : 0.0f;
    T *o = (T *)p.o + b * p.ost[0] + h * p.ost[1] + s * p.ost[2];
#pragma unroll
    for (int r = 0; r < DVL; r++) {
        int e = lane + 32 * r;
        if (e < Dv)
            o[e] = cu_fromf<T>(acc[r] * inv);
    }
}

/* Small heads (D, Dv in {32, 64}), any float dtype, f32 arithmetic: G
 * neighbouring lanes share one query row and split its keys (lane p takes
 * keys p, p + G, ...), each with its own online softmax over its keys; the
 * G partial results are merged by shuffles at the end.  G is 4, 8 or 16,
 * picked so that small batches still fill the card (one thread per row
 * left most SMs idle at batch 1).  q and the accumulator live in
 * registers; key and value tiles in shared memory, rows padded by four
 * floats so the G rows read at once fall in distinct banks. */
#define GQT 128 /* threads per block */
#define GKT 64  /* keys per tile */

/* One key tile of flash_grp for this lane's keys: scores, online softmax
 * update of (m, l), accumulation into acc. */
template <typename T, int D, int DV, int G>
__device__ __forceinline__ void grp_tile(const cu_attn &p, const float *kt, const float *vt, int64_t t0, int64_t b,
                                         int64_t h, int64_t s, const float (&qr)[D], float (&acc)[DV], float &m,
                                         float &l)
{
    constexpr int LK = D + 4, LV = DV + 4, NJ = GKT / G;
    const int part = threadIdx.x % G;
    const int64_t shift = attn_shift(p, b);
    float sc[NJ];
    float mc = -INFINITY;
#pragma unroll
    for (int u = 0; u < NJ; u++) {
        const int j = part + u * G;
        const int64_t t = t0 + j;
        float x = -INFINITY;
        if (t < p.T && (!p.causal || t <= s + shift)) {
            const float4 *kr = (const float4 *)(kt + j * LK);
            float a = 0.0f;
#pragma unroll
            for (int d4 = 0; d4 < D / 4; d4++) {
                float4 k4 = kr[d4];
                a += qr[4 * d4] * k4.x + qr[4 * d4 + 1] * k4.y + qr[4 * d4 + 2] * k4.z + qr[4 * d4 + 3] * k4.w;
            }
            bool vis = true;
            if (p.mask) {
                int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
                if (p.mask_dt == RLX_BOOL)
                    vis = ((const unsigned char *)p.mask)[mo] != 0;
                else
                    a += cu_tof<T>(((const T *)p.mask)[mo]) * LOG2E_F;
            }
            if (vis)
                x = a;
        }
        sc[u] = x;
        mc = fmaxf(mc, x);
    }
    float mn = fmaxf(m, mc);
    if (mn == -INFINITY)
        return; /* every key of this lane masked so far */
    float corr = exp2f(m - mn);
    l *= corr;
#pragma unroll
    for (int e = 0; e < DV; e++)
        acc[e] *= corr;
#pragma unroll
    for (int u = 0; u < NJ; u++) {
        float pu = exp2f(sc[u] - mn); /* 0 for masked keys */
        l += pu;
        const float4 *vr = (const float4 *)(vt + (part + u * G) * LV);
#pragma unroll
        for (int e4 = 0; e4 < DV / 4; e4++) {
            float4 v4 = vr[e4];
            acc[4 * e4] += pu * v4.x;
            acc[4 * e4 + 1] += pu * v4.y;
            acc[4 * e4 + 2] += pu * v4.z;
            acc[4 * e4 + 3] += pu * v4.w;
        }
    }
    m = mn;
}

template <typename T, int D, int DV, int G>
__global__ void __launch_bounds__(GQT, D == 32 ? 3 : 2) flash_grp(cu_attn p, int vec)
{
    cu_grid_wait();
    constexpr int LK = D + 4, LV = DV + 4, QB = GQT / G;
    /* two buffers (the next tile loads during this one) where they fit */
    constexpr int NB = 2 * GKT * (LK + LV) * 4 <= 48 * 1024 ? 2 : 1;
    __shared__ __align__(16) float ks[NB][GKT * LK];
    __shared__ __align__(16) float vs[NB][GKT * LV];
    const int part = threadIdx.x % G;
    const attn_pos ps = attn_pos_of(p, QB, blockIdx.x);
    const int64_t b = ps.b, h = ps.h, hk = ps.hk, s0 = ps.q0, s = s0 + threadIdx.x / G;
    const bool active = s < p.S;
    const float sl2 = p.scale * LOG2E_F;
    float qr[D], acc[DV];
    const T *qrow = (const T *)p.q + b * p.qst[0] + h * p.qst[1] + (active ? s : 0) * p.qst[2];
#pragma unroll
    for (int d = 0; d < D; d++)
        qr[d] = active ? cu_tof<T>(qrow[d]) * sl2 : 0.0f;
#pragma unroll
    for (int e = 0; e < DV; e++)
        acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const T *kb = (const T *)p.k + b * p.kst[0] + hk * p.kst[1];
    const T *vb = (const T *)p.v + b * p.vst[0] + hk * p.vst[1];
    const int64_t shift = attn_shift(p, b);
    int64_t t_end = p.T;
    if (p.causal) {
        int64_t s_last = s0 + QB - 1 < p.S - 1 ? s0 + QB - 1 : p.S - 1;
        int64_t lim = s_last + shift + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    const int n_tiles = (int)((t_end + GKT - 1) / GKT);
    if (n_tiles > 0) {
        load_rows<T, float, GKT, D, LK, GQT>(ks[0], kb, p.kst[2], 0, p.T, vec);
        load_rows<T, float, GKT, DV, LV, GQT>(vs[0], vb, p.vst[2], 0, p.T, vec);
    }
    for (int it = 0; it < n_tiles; it++) {
        const int64_t t0 = (int64_t)it * GKT;
        const int buf = NB == 2 ? it & 1 : 0;
        if (NB == 2 && it + 1 < n_tiles) {
            load_rows<T, float, GKT, D, LK, GQT>(ks[buf ^ 1], kb, p.kst[2], t0 + GKT, p.T, vec);
            load_rows<T, float, GKT, DV, LV, GQT>(vs[buf ^ 1], vb, p.vst[2], t0 + GKT, p.T, vec);
            cp_wait<2>(); /* the next tile's two groups may stay in flight */
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (active)
            grp_tile<T, D, DV, G>(p, ks[buf], vs[buf], t0, b, h, s, qr, acc, m, l);
        __syncthreads(); /* this buffer is refilled next */
        if (NB == 1 && it + 1 < n_tiles) {
            load_rows<T, float, GKT, D, LK, GQT>(ks[0], kb, p.kst[2], t0 + GKT, p.T, vec);
            load_rows<T, float, GKT, DV, LV, GQT>(vs[0], vb, p.vst[2], t0 + GKT, p.T, vec);
        }
    }
    /* merge the G lanes of the row (all lanes take part: shuffles need the
     * whole warp, and the G lanes of a row share its activity) */
    float mall = m;
#pragma unroll
    for (int o = 1; o < G; o <<= 1)
        mall = fmaxf(mall, __shfl_xor_sync(0xffffffffu, mall, o));
    float f = mall == -INFINITY ? 0.0f : exp2f(m - mall);
    l *= f;
#pragma unroll
    for (int o = 1; o < G; o <<= 1)
        l += __shfl_xor_sync(0xffffffffu, l, o);
#pragma unroll
    for (int e = 0; e < DV; e++) {
        float x = acc[e] * f;
#pragma unroll
        for (int o = 1; o < G; o <<= 1)
            x += __shfl_xor_sync(0xffffffffu, x, o);
        acc[e] = x;
    }
    if (!active)
        return;
    float inv = l > 0 ? 1.0f / l : 0.0f;
    T *o = (T *)p.o + b * p.ost[0] + h * p.ost[1] + s * p.ost[2];
#pragma unroll
    for (int e = 0; e < DV; e++)
        if (e % G == part)
            o[e] = cu_fromf<T>(acc[e] * inv);
}

/* ------------------------------------------------ tensor cores (sm_80+) */

/* A block is W = 4 or 8 warps x 16 query rows; keys and values stream through
 * shared memory in tiles of 64 rows, stored as loaded (f16/bf16), rows
 * padded by 8 elements so the fragment reads below hit distinct banks.
 * Per warp and key tile: S = Q K^T (m16n8k16, Q fragments kept in
 * registers), scale and masks in f32, online softmax in base 2, then the
 * probabilities (rounded to the data type, the accumulator layout reused
 * as the A operand) times V, with V's B fragments read by ldmatrix.trans. */
#define TCK 64 /* keys per tile */

/* KM: p's mask is the same for every query row (a padding mask, [B, 1, 1,
 * T] and the like); it is read once per key tile into shared memory, as
 * what it adds to the base-2 scores (-inf where a key is hidden or past T).
 * A template flag, so that the other instances carry none of it. */
/* Split keys: each query block's key tiles are cut into chunks of `chunk`
 * tiles, one block each (ns per query block), when the query blocks alone
 * would leave SMs idle or each SM one warp per scheduler.  Each writes its
 * unnormalised output rows, running max and sum (f32) to part; tc_combine
 * then merges them.  ns == 1: no split, the output is written directly. */
typedef struct tc_split {
    int ns, chunk;
    float *part; /* per split block: [R][D] output, then [R] (max, sum) pairs */
} tc_split;

/* Key tiles the query block at row q0 (rows rows) reads: all of them, or
 * causal, up to its last row's diagonal. */
__device__ __forceinline__ int tc_tiles(const cu_attn &p, int64_t b, int64_t q0, int rows)
{
    int64_t t_end = p.T;
    if (p.causal) {
        int64_t lim = (q0 + rows - 1 < p.S - 1 ? q0 + rows - 1 : p.S - 1) + attn_shift(p, b) + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    return (int)((t_end + TCK - 1) / TCK);
}

/* Dynamic shared memory of flash_tc: two buffers each of keys and values
 * (the next tile loads during this one), then the key mask row. */
static constexpr size_t tc_smem(int D, int es) { return (size_t)4 * TCK * TC_LD(D) * es + TCK * sizeof(float); }

template <typename T, int D, int W, bool KM>
/* D == 32: up to 128 registers, so two or more blocks fit on an SM. */
__global__ void __launch_bounds__(W * 32, D == 32 ? 512 / (W * 32) : 1) flash_tc(cu_attn p, int vec, tc_split sp)
{
    cu_grid_wait();
    constexpr int LD = TC_LD(D), NT = TCK / 8, KD = D / 16, ND = D / 8, NB = 2;
    extern __shared__ __align__(16) unsigned char tc_sh[];
    T(*ks)[TCK * LD] = (T(*)[TCK * LD]) tc_sh;
    T(*vs)[TCK * LD] = (T(*)[TCK * LD])(tc_sh + (size_t)NB * TCK * LD * sizeof(T));
    float *mk = (float *)(tc_sh + (size_t)2 * NB * TCK * LD * sizeof(T));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    /* head dim 32 never splits (tc_plan_of): its 128-register cap has no
     * room for the bookkeeping */
    constexpr bool SPLIT = D >= 64;
    const int ns = SPLIT ? sp.ns : 1, chunk = SPLIT ? sp.chunk : INT_MAX;
    const unsigned spi = SPLIT ? blockIdx.x % (unsigned)ns : 0; /* this block's key chunk */
    const attn_pos ps = attn_pos_of(p, W * 16, SPLIT ? blockIdx.x / (unsigned)ns : blockIdx.x);
    const int64_t b = ps.b, h = ps.h, hk = ps.hk, q0 = ps.q0, w0 = q0 + warp * 16;
    const T *qb = (const T *)p.q + b * p.qst[0] + h * p.qst[1];
    const T *kb = (const T *)p.k + b * p.kst[0] + hk * p.kst[1];
    const T *vb = (const T *)p.v + b * p.vst[0] + hk * p.vst[1];

    /* Q's A fragments straight from global memory (rows past S are zeros):
     * no shared-memory round trip and no barrier before the first key tile */
    uint32_t qf[KD][4];
    {
        const int64_t r0 = w0 + g, r1 = w0 + g + 8;
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int col = kk * 16 + c * 8 + 2 * tg;
                qf[kk][2 * c] = r0 < p.S ? tc_q32(qb + r0 * p.qst[2] + col, vec) : 0u;
                qf[kk][2 * c + 1] = r1 < p.S ? tc_q32(qb + r1 * p.qst[2] + col, vec) : 0u;
            }
    }
    float o[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float sl2 = p.scale * LOG2E_F;
    const int64_t shift = attn_shift(p, b), rows[2] = {w0 + g, w0 + g + 8};
    const int64_t w_last = w0 + 15 < p.S - 1 ? w0 + 15 : p.S - 1;
    const int n_tiles = tc_tiles(p, b, q0, W * 16);
    const int it0 = (int)spi * chunk, it1 = chunk < n_tiles - it0 ? it0 + chunk : n_tiles;
    if (spi > 0 && it0 >= it1)
        return; /* a chunk past this block's keys: tc_combine skips it */
    /* the first chunk holds every key of this block's rows: the output */
    const bool part = ns > 1 && n_tiles > chunk;
    if (it0 < it1) {
        load_rows<T, T, TCK, D, LD, W * 32>(ks[0], kb, p.kst[2], (int64_t)it0 * TCK, p.T, vec);
        load_rows<T, T, TCK, D, LD, W * 32>(vs[0], vb, p.vst[2], (int64_t)it0 * TCK, p.T, vec);
    }
    for (int it = it0; it < it1; it++) {
        const int64_t t0 = (int64_t)it * TCK;
        const int buf = (it - it0) & 1;
        if (it + 1 < it1) {
            load_rows<T, T, TCK, D, LD, W * 32>(ks[buf ^ 1], kb, p.kst[2], t0 + TCK, p.T, vec);
            load_rows<T, T, TCK, D, LD, W * 32>(vs[buf ^ 1], vb, p.vst[2], t0 + TCK, p.T, vec);
            cp_wait<2>(); /* the next tile's two groups may stay in flight */
        } else {
            cp_wait<0>();
        }
        if (KM && threadIdx.x < TCK) { /* the last tile's readers are past the barrier below */
            const int64_t t = t0 + threadIdx.x;
            float add = -INFINITY;
            if (t < p.T) {
                const int64_t mo = b * p.mst[0] + h * p.mst[1] + t * p.mst[3];
                if (p.mask_dt == RLX_BOOL)
                    add = ((const unsigned char *)p.mask)[mo] ? 0.0f : -INFINITY;
                else
                    add = cu_tof<T>(((const T *)p.mask)[mo]) * LOG2E_F;
            }
            mk[threadIdx.x] = add;
        }
        __syncthreads();
        const T *kt = ks[buf], *vt = vs[buf];
        /* warp-uniform skip: no valid row, or every key in the future */
        if (w0 < p.S && !(p.causal && t0 > w_last + shift)) {
            float sc[NT][4];
#pragma unroll
            for (int j = 0; j < NT; j++) {
                sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
                /* lanes 8i..8i+7 address matrix i: keys j*8.., dims
                 * kk*16 + 8i (i = 0..3 covers kk and kk + 1) */
                const T *kr = kt + (j * 8 + (lane & 7)) * LD + (lane >> 3) * 8;
                const T *kw = kt + (j * 8 + g) * LD + 2 * tg;
#pragma unroll
                for (int kk = 0; kk < KD; kk += 2) {
                    uint32_t bf[4];
                    if (D == 32) { /* fewer live registers where 128 is the cap */
                        bf[0] = tc_lds32(kw + kk * 16), bf[1] = tc_lds32(kw + kk * 16 + 8);
                        bf[2] = tc_lds32(kw + kk * 16 + 16), bf[3] = tc_lds32(kw + kk * 16 + 24);
                    } else {
                        tc_ldsm_x4<false>(bf, kr + kk * 16);
                    }
                    tc_mma(sc[j], qf[kk], bf[0], bf[1], T());
                    tc_mma(sc[j], qf[kk + 1], bf[2], bf[3], T());
                }
            }
            /* the staged key mask also hides the keys past T; causal masks
             * only the tiles that reach past this warp's first row.
             * (Written so that the !KM instance is the plain form: a
             * short-circuit here put a branch between the two matrix
             * products and cost 7%.) */
            const bool diag = p.causal && t0 + TCK - 1 > w0 + shift;
            const bool edge = KM ? diag : diag || t0 + TCK > p.T || p.mask;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = sc[j][e] * sl2;
                    if (KM)
                        x += mk[j * 8 + 2 * tg + (e & 1)];
                    if (edge) {
                        int64_t s = rows[e >> 1], t = t0 + j * 8 + 2 * tg + (e & 1);
                        bool vis = t < p.T && (!p.causal || t <= s + shift);
                        if (vis && p.mask && !KM && s < p.S) {
                            int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
                            if (p.mask_dt == RLX_BOOL)
                                vis = ((const unsigned char *)p.mask)[mo] != 0;
                            else
                                x += cu_tof<T>(((const T *)p.mask)[mo]) * LOG2E_F;
                        }
                        if (!vis)
                            x = -INFINITY;
                    }
                    sc[j][e] = x;
                }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < NT; j++)
                    mx = fmaxf(mx, fmaxf(sc[j][2 * r], sc[j][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mn = fmaxf(m[r], mx);
                float base = mn == -INFINITY ? 0.0f : mn; /* a row masked so far: no inf - inf */
                float corr = exp2f(m[r] - base), sum = 0.0f;
                m[r] = mn;
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        float pv = exp2f(sc[j][2 * r + c] - base);
                        sc[j][2 * r + c] = pv;
                        sum += pv;
                    }
                l[r] = l[r] * corr + sum; /* this thread's columns; the quad is summed at the end */
#pragma unroll
                for (int n = 0; n < ND; n++) {
                    o[n][2 * r] *= corr;
                    o[n][2 * r + 1] *= corr;
                }
            }
#pragma unroll
            for (int kk = 0; kk < TCK / 16; kk++) {
                uint32_t a[4] = {tc_pack(sc[2 * kk][0], sc[2 * kk][1], T()), tc_pack(sc[2 * kk][2], sc[2 * kk][3], T()),
                                 tc_pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1], T()),
                                 tc_pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3], T())};
                const T *vr = vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
                for (int n = 0; n < D / 16; n++) {
                    uint32_t bf[4];
                    tc_ldsm_x4<true>(bf, vr + n * 16);
                    tc_mma(o[2 * n], a, bf[0], bf[1], T());
                    tc_mma(o[2 * n + 1], a, bf[2], bf[3], T());
                }
            }
        }
        __syncthreads(); /* this buffer is refilled next */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if (rows[r] >= p.S)
            continue;
        if (part) { /* this chunk's part, merged by tc_combine */
            const int rr = warp * 16 + g + 8 * r;
            float *po = sp.part + (size_t)blockIdx.x * (W * 16) * (D + 2);
#pragma unroll
            for (int n = 0; n < ND; n++)
                *(float2 *)(po + rr * D + n * 8 + 2 * tg) = make_float2(o[n][2 * r], o[n][2 * r + 1]);
            if (tg == 0)
                *(float2 *)(po + (W * 16) * D + 2 * rr) = make_float2(m[r], l[r]);
            continue;
        }
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        T *orow = (T *)p.o + b * p.ost[0] + h * p.ost[1] + rows[r] * p.ost[2];
        const bool pair = (uintptr_t)orow % 4 == 0; /* neighbours as one 32-bit store */
#pragma unroll
        for (int n = 0; n < ND; n++) {
            if (pair) {
                *(uint32_t *)(orow + n * 8 + 2 * tg) = tc_pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv, T());
            } else {
                orow[n * 8 + 2 * tg] = cu_fromf<T>(o[n][2 * r] * inv);
                orow[n * 8 + 2 * tg + 1] = cu_fromf<T>(o[n][2 * r + 1] * inv);
            }
        }
    }
}

/* Merges the key chunks of split flash_tc blocks where there are two or
 * more (up to 32): one warp per query row, lane i reads chunk i's max and
 * sum, then each lane D / 32 columns of every chunk's output.  rows: query
 * rows per flash_tc block. */
template <typename T, int D> __global__ void __launch_bounds__(128) tc_combine(cu_attn p, tc_split sp, int rows)
{
    cu_grid_wait();
    constexpr int CPL = D / 32; /* columns per lane: 2 or 4 */
    const int lane = threadIdx.x & 31;
    const int64_t gr = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (gr >= p.B * p.H * p.S)
        return;
    const int64_t bh = gr / p.S, s = gr % p.S, nq = (p.S + rows - 1) / rows, qi = s / rows;
    const int nv = (tc_tiles(p, bh / p.H, qi * rows, rows) + sp.chunk - 1) / sp.chunk;
    if (nv < 2)
        return;                                                  /* flash_tc wrote this row */
    const int64_t blk = bh * nq + (p.causal ? nq - 1 - qi : qi); /* flash_tc's block order */
    const int rr = (int)(s - qi * rows);
    const size_t rec = (size_t)rows * (D + 2);
    const float *base = sp.part + (size_t)blk * sp.ns * rec;
    float2 ml = make_float2(-INFINITY, 0.0f);
    if (lane < nv)
        ml = *(const float2 *)(base + lane * rec + (size_t)rows * D + 2 * rr);
    float mx = ml.x;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    /* a chunk whose keys are all hidden from this row weighs nothing */
    const float f = ml.x == -INFINITY ? 0.0f : exp2f(ml.x - mx);
    float l = ml.y * f;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        l += __shfl_xor_sync(0xffffffffu, l, o);
    float acc[CPL] = {};
#pragma unroll 4
    for (int i = 0; i < nv; i++) {
        const float fi = __shfl_sync(0xffffffffu, f, i);
        const float *pr = base + i * rec + rr * D + lane * CPL;
        if constexpr (CPL == 4) {
            const float4 v = *(const float4 *)pr;
            acc[0] += v.x * fi, acc[1] += v.y * fi, acc[2] += v.z * fi, acc[3] += v.w * fi;
        } else {
            const float2 v = *(const float2 *)pr;
            acc[0] += v.x * fi, acc[1] += v.y * fi;
        }
    }
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    T *orow = (T *)p.o + (bh / p.H) * p.ost[0] + (bh % p.H) * p.ost[1] + s * p.ost[2];
#pragma unroll
    for (int c = 0; c < CPL; c++)
        orow[lane * CPL + c] = cu_fromf<T>(acc[c] * inv);
}

/* ------------------------------------------------------------- host side */

static size_t attn_smem(int64_t D, int64_t Dv) { return (size_t)(TK * (D + 1) + TK * Dv + QPB * D) * sizeof(float); }

template <typename T> static void *attn_fn(int dvl)
{
    switch (dvl) {
    case 1: return (void *)flash_attn<T, 1>;
    case 2: return (void *)flash_attn<T, 2>;
    case 4: return (void *)flash_attn<T, 4>;
    default: return (void *)flash_attn<T, 8>;
    }
}

static int dvl_of(int64_t Dv) { return Dv <= 32 ? 1 : Dv <= 64 ? 2 : Dv <= 128 ? 4 : 8; }

/* Tensor cores: sm_80 or newer, unless RLX_CUDA_NO_TC_ATTENTION=1. */
static bool tc_available(void) { return rlx_cu_dev->major >= 8 && !rlx_cu_cfg.cuda_no_tc_attention; }

static bool tc_fits(rlx_dtype dt, int64_t D, int64_t Dv)
{
    return (dt == RLX_F16 || dt == RLX_BF16) && D == Dv && (D == 32 || D == 64 || D == 128) && tc_available();
}

bool rlx_cu_attention_dims_ok(rlx_dtype dt, int64_t D, int64_t Dv)
{
    return cu_is_f(dt) && D >= 1 && Dv >= 1 && D <= 256 && Dv <= 256;
}

/* Lets every flash_tc instance of head dim D take its shared memory (above
 * the default 48 KB at D = 128). */
template <typename T, int D> static cudaError_t tc_allow_smem(void)
{
    const int bytes = (int)tc_smem(D, sizeof(T));
    if (bytes <= 48 * 1024)
        return cudaSuccess;
    const void *fns[] = {(const void *)flash_tc<T, D, 2, false>, (const void *)flash_tc<T, D, 2, true>,
                         (const void *)flash_tc<T, D, 4, false>, (const void *)flash_tc<T, D, 4, true>,
                         (const void *)flash_tc<T, D, 8, false>, (const void *)flash_tc<T, D, 8, true>};
    for (const void *fn : fns) {
        cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

rlx_status rlx_cu_attention_prepare(const rlx_thunk *t, rlx_dtype dt, int64_t D, int64_t Dv)
{
    if (tc_fits(dt, D, Dv)) {
        cudaError_t e = cudaSuccess;
        if (D == 128)
            e = dt == RLX_F16 ? tc_allow_smem<__half, 128>() : tc_allow_smem<__nv_bfloat16, 128>();
        return e == cudaSuccess ? RLX_OK : rlx_cu_error(t, e, "attention shared memory");
    }
    if ((D == 32 && Dv == 32) || (D == 64 && Dv == 64))
        return RLX_OK; /* static shared memory */
    size_t smem = attn_smem(D, Dv);
    if (smem > 48 * 1024) {
        void *fn;
        CU_FLOAT_DISPATCH(dt, T, fn = attn_fn<T>(dvl_of(Dv)));
        cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return rlx_cu_error(t, e, "attention shared memory");
    }
    return RLX_OK;
}

static int sm_count(void) { return rlx_cu_dev->sms; }

/* How flash_tc runs B x H heads of S queries over T keys: warps per block
 * (W), query blocks per head, and the key split. */
typedef struct tc_plan {
    int w, ns, chunk;
    int64_t nq;
    size_t part_bytes; /* scratch of the split's parts (0: no split) */
} tc_plan;

static tc_plan tc_plan_of(int64_t B, int64_t H, int64_t S, int64_t T, int64_t D)
{
    /* four warps (64 queries) per block; eight (128 queries, each key tile
     * loaded once for twice the queries) when that still leaves two blocks
     * per SM.  One-warp blocks, tried for small batches, measured slower
     * (each warp then loads whole tiles alone). */
    const int64_t sms = sm_count(), bh = B * H;
    const int w_env = rlx_cu_cfg.cuda_attn_warps; /* RLX_CUDA_ATTN_WARPS overrides the choice (tuning) */
    /* the most key chunks per query block (1: no split; tuning) */
    const int ns_env = rlx_cu_cfg.cuda_attn_split; /* RLX_CUDA_ATTN_SPLIT */
    tc_plan pl;
    pl.w = w_env ? w_env : bh * ((S + 127) / 128) >= 2 * sms ? 8 : 4;
    pl.nq = (S + 16 * pl.w - 1) / (16 * pl.w);
    /* halve the key chunks while the blocks still fit two per SM: one block
     * per SM leaves each scheduler one warp, and the block with the most keys
     * alone sets the time (decoder prefill, causal S = 512: 128 blocks of
     * 1-8 tiles).  Not past one wave: 512 blocks of two tiles each took the
     * decoder 2.686 ms against 2.633 with 256 of four (H200).  Chunks keep
     * two tiles or more: one-tile chunks did not repay the parts' traffic
     * and tc_combine (encoder b1, T = 128). */
    const int64_t blocks = bh * pl.nq, tiles = (T + TCK - 1) / TCK;
    int ns = 1;
    while (D >= 64 && 4 * ns <= tiles && ns < 32 && blocks * (2 * ns) <= 2 * sms && (ns_env <= 0 || 2 * ns <= ns_env))
        ns *= 2;
    pl.chunk = (int)((tiles + ns - 1) / ns);
    pl.ns = ns > 1 ? (int)((tiles + pl.chunk - 1) / pl.chunk) : 1;
    if (pl.ns == 1)
        pl.chunk = INT_MAX;
    pl.part_bytes = pl.ns > 1 ? (size_t)(blocks * pl.ns) * (size_t)(16 * pl.w) * (size_t)(D + 2) * sizeof(float) : 0;
    return pl;
}

static size_t decode_scratch(int64_t B, int64_t H, int64_t T, int64_t D);

size_t rlx_cu_attention_scratch(rlx_dtype dt, int64_t B, int64_t H, int64_t S, int64_t T, int64_t D, int64_t Dv)
{
    if (B * H * S == 0)
        return 0;
    const size_t tc = tc_fits(dt, D, Dv) ? tc_plan_of(B, H, S, T, D).part_bytes : 0;
    const size_t dec = S == 1 && D == Dv && (D == 64 || D == 128) ? decode_scratch(B, H, T, D) : 0;
    return tc > dec ? tc : dec;
}

/* Whether a tensor's start and its three outer strides (es-byte elements)
 * fall on multiples of `bytes`. */
static bool aligned_to(const void *p, const int64_t *st, size_t es, size_t bytes)
{
    if ((uintptr_t)p % bytes)
        return false;
    for (int i = 0; i < 3; i++)
        if (((size_t)st[i] * es) % bytes)
            return false;
    return true;
}

static bool aligned16(const void *p, const int64_t *st, size_t es) { return aligned_to(p, st, es, 16); }

/* ------------------------------------------- one query row (decode steps) */

/* A decode step's attention: one query row per head.  A block takes one
 * sequence and kv head with every query head of its group, so each key and
 * value row is read once for the group; its warps take interleaved keys,
 * each lane DEC_EPL consecutive elements of a row, with an online softmax
 * per head, and the block merges its warps at the end.  No tile of 64
 * query rows for one real row, as the tensor-core kernel would run.
 *
 * One sequence's kv heads alone are a few blocks (8 for a Qwen3-0.6B step at
 * batch 1) on a GPU of 132 SMs, so the keys are also cut into ns chunks, a
 * block each (flash-decoding): each writes its unnormalised rows with their
 * max and sum to part, and the last block of a (sequence, kv head) to finish
 * (counted on a ticket the thunk keeps across runs) merges them; without
 * tickets, a second kernel, attn_decode_combine, does.  A chunk's length
 * follows the sequence's current length (known only on the device), so one
 * captured grid serves every position of the cache. */
#define DEC_WARPS 8
#define DEC_KEYS 4         /* key rows in flight per warp */
#define DEC_MAX_CHUNKS 128 /* key chunks per (sequence, kv head) at most */
/* a chunk's partial row: D sums, max, sum, 2 unused (16-byte rows: the last
 * block copies them to shared memory whole) */
#define DEC_ROW(D) ((D) + 4)
/* floats of shared memory the last block stages chunks' rows in (31 chunks
 * of a Qwen3 head pair at once) */
#define DEC_STAGE 8192
typedef struct dec_split {
    int ns;      /* key chunks per (sequence, kv head); 1: the output is written directly */
    int vec;     /* a lane's D / 32 elements of a key or value row load as one access */
    float *part; /* [B * Hk][ns][G][DEC_ROW(D)]: output row, then max and sum */
} dec_split;

/* Merges element d of query head h's row of sequence b over attn_decode's
 * key chunks (read through L2: other blocks wrote them). */
template <typename T, int D>
__device__ __forceinline__ void decode_merge(const cu_attn &p, const dec_split &sp, int64_t b, int64_t h, int d)
{
    const int G = (int)(p.H / p.Hk);
    const int64_t hk = h / G, g = h % G;
    const float *pr = sp.part + ((b * p.Hk + hk) * sp.ns * G + g) * DEC_ROW(D);
    const int64_t step = (int64_t)G * DEC_ROW(D);
    float mx = -INFINITY;
    for (int s = 0; s < sp.ns; s++)
        mx = fmaxf(mx, __ldcg(pr + s * step + D));
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY)
        for (int s = 0; s < sp.ns; s++) {
            const float ms = __ldcg(pr + s * step + D);
            if (ms == -INFINITY)
                continue; /* an empty chunk: its row was never written */
            const float f = __expf(ms - mx);
            num += __ldcg(pr + s * step + d) * f;
            den += __ldcg(pr + s * step + D + 1) * f;
        }
    T *o = (T *)p.o + b * p.ost[0] + h * p.ost[1];
    o[d] = cu_fromf<T>(den > 0 ? num / den : 0.0f);
}

/* Registers: at most 80 where GM <= 2, so three blocks fit an SM (batch 8's
 * 320 blocks in one wave; 128 registers, two blocks, lost 8%). */
template <typename T, int D, int GM>
__global__ void __launch_bounds__(DEC_WARPS * 32, GM <= 2 ? 3 : 2) attn_decode(cu_attn p, dec_split sp)
{
    cu_grid_wait();
    constexpr int EPL = D / 32;
    constexpr int SMO = DEC_WARPS * GM * D;
    __shared__ float sm_m[DEC_WARPS][GM], sm_l[DEC_WARPS][GM];
    /* the warps' rows, then (the last block) the chunks' rows */
    __shared__ __align__(16) float sm_buf[SMO > DEC_STAGE ? SMO : DEC_STAGE];
    float(*sm_o)[GM][D] = (float(*)[GM][D])sm_buf;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    /* 32-bit index arithmetic (decode_fits bounds T): a 64-bit division
     * is a long chain of its own on the path to the first loads */
    const int nhk = (int)p.Hk, G = (int)(p.H / p.Hk);
    const int64_t b = (int)blockIdx.x / nhk, hk = (int)blockIdx.x % nhk;
    const T *kb = (const T *)p.k + b * p.kst[0] + hk * p.kst[1] + lane * EPL;
    const T *vb = (const T *)p.v + b * p.vst[0] + hk * p.vst[1] + lane * EPL;
    float q[GM][EPL], acc[GM][EPL], m[GM], l[GM];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        const T *qr = (const T *)p.q + b * p.qst[0] + (hk * G + (g < G ? g : 0)) * p.qst[1] + lane * EPL;
#pragma unroll
        for (int e = 0; e < EPL; e++) {
            q[g][e] = g < G ? cu_tof<T>(qr[e]) * p.scale : 0.0f;
            acc[g][e] = 0.0f;
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }
    int t_end = (int)p.T;
    if (p.causal) {
        const int64_t lim = attn_shift(p, b) + 1;
        t_end = lim < t_end ? (lim > 0 ? (int)lim : 0) : t_end;
    }
    /* this block's chunk: whole rounds of DEC_WARPS * DEC_KEYS keys */
    constexpr int ROUND = DEC_WARPS * DEC_KEYS;
    const int chunk = ((t_end + sp.ns - 1) / sp.ns + ROUND - 1) / ROUND * ROUND;
    const int c0 = (int)blockIdx.y * chunk, c1 = c0 + chunk < t_end ? c0 + chunk : t_end;
    for (int t0 = c0 + warp * DEC_KEYS; t0 < c1; t0 += ROUND) {
        /* every key and value row of the round in flight at once: a value
         * row loaded only when its key's turn comes waits out the memory's
         * latency once per key */
        float kr[DEC_KEYS][EPL], vrs[DEC_KEYS][EPL];
        /* keys past the chunk read its last row again (their scores are
         * masked): no predicated loads */
        if (sp.vec) {
            struct alignas(EPL * sizeof(T)) lane_row {
                T x[EPL];
            };
#pragma unroll
            for (int j = 0; j < DEC_KEYS; j++) {
                const int64_t t = t0 + j < c1 ? t0 + j : c1 - 1;
                const lane_row kx = *(const lane_row *)(kb + t * p.kst[2]), vx = *(const lane_row *)(vb + t * p.vst[2]);
#pragma unroll
                for (int e = 0; e < EPL; e++)
                    kr[j][e] = cu_tof<T>(kx.x[e]), vrs[j][e] = cu_tof<T>(vx.x[e]);
            }
        } else {
#pragma unroll
            for (int j = 0; j < DEC_KEYS; j++) {
                const int64_t t = t0 + j < c1 ? t0 + j : c1 - 1;
#pragma unroll
                for (int e = 0; e < EPL; e++)
                    kr[j][e] = cu_tof<T>(kb[t * p.kst[2] + e]), vrs[j][e] = cu_tof<T>(vb[t * p.vst[2] + e]);
            }
        }
        /* the round's scores first, their warp sums side by side (none
         * waits on another), then one softmax update per head a round */
        float sc[DEC_KEYS][GM];
#pragma unroll
        for (int j = 0; j < DEC_KEYS; j++)
#pragma unroll
            for (int g = 0; g < GM; g++) {
                float s = 0.0f;
#pragma unroll
                for (int e = 0; e < EPL; e++)
                    s += q[g][e] * kr[j][e];
                sc[j][g] = s;
            }
#pragma unroll
        for (int j = 0; j < DEC_KEYS; j++)
#pragma unroll
            for (int g = 0; g < GM; g++)
                sc[j][g] = t0 + j < c1 ? cu_warp_sum(sc[j][g]) : -INFINITY;
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float mn = m[g];
#pragma unroll
            for (int j = 0; j < DEC_KEYS; j++)
                mn = fmaxf(mn, sc[j][g]);
            /* key t0 is inside the chunk: mn is finite */
            const float corr = __expf(m[g] - mn);
            float pr[DEC_KEYS], ps = 0.0f;
#pragma unroll
            for (int j = 0; j < DEC_KEYS; j++) {
                pr[j] = __expf(sc[j][g] - mn);
                ps += pr[j];
            }
            l[g] = l[g] * corr + ps;
            m[g] = mn;
#pragma unroll
            for (int e = 0; e < EPL; e++) {
                float a = acc[g][e] * corr;
#pragma unroll
                for (int j = 0; j < DEC_KEYS; j++)
                    a += pr[j] * vrs[j][e];
                acc[g][e] = a;
            }
        }
    }
#pragma unroll
    for (int g = 0; g < GM; g++) {
        if (g >= G)
            break;
        if (lane == 0)
            sm_m[warp][g] = m[g], sm_l[warp][g] = l[g];
#pragma unroll
        for (int e = 0; e < EPL; e++)
            sm_o[warp][g][lane * EPL + e] = acc[g][e];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
        const int g = i / D, d = i % D;
        float mx = -INFINITY;
        for (int w = 0; w < DEC_WARPS; w++)
            mx = fmaxf(mx, sm_m[w][g]);
        float num = 0.0f, den = 0.0f;
        if (mx != -INFINITY)
            for (int w = 0; w < DEC_WARPS; w++) {
                float f = __expf(sm_m[w][g] - mx);
                num += sm_o[w][g][d] * f;
                den += sm_l[w][g] * f;
            }
        if (sp.ns > 1) {
            /* an empty chunk leaves max -inf: the merge skips it */
            float *pr = sp.part + (((int64_t)blockIdx.x * sp.ns + blockIdx.y) * G + g) * DEC_ROW(D);
            pr[d] = num;
            if (d == 0)
                pr[D] = mx, pr[D + 1] = den;
        } else {
            T *o = (T *)p.o + b * p.ost[0] + (hk * G + g) * p.ost[1];
            o[d] = cu_fromf<T>(den > 0 ? num / den : 0.0f);
        }
    }
    if (sp.ns == 1 || !p.tickets)
        return;
    /* the last of the (sequence, kv head)'s chunk blocks to finish merges
     * them all, and sets its ticket back to zero for the next run.  The
     * barrier orders the block's partial stores before thread 0's release
     * (and its acquire before the last block's loads): one fence a block,
     * not one in each of its threads */
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                     : "=r"(prev)
                     : "l"(p.tickets + blockIdx.x)
                     : "memory");
        last = prev == (unsigned)sp.ns - 1;
        if (last)
            p.tickets[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!last)
        return;
    /* the chunks' rows copied into shared memory (asynchronous 16-byte
     * copies, all in flight at once), up to DEC_STAGE floats at a time;
     * then each output element's sum over them.  Rolled loops: this code
     * runs once a launch, fetched cold each time, so its length counts
     * (loads batched by 8: 3.5 us at batch 1; unrolled over 32 chunks held
     * in registers: 3 us) */
    constexpr int ROW = DEC_ROW(D), EPT = (GM * D + DEC_WARPS * 32 - 1) / (DEC_WARPS * 32);
    const int ns = sp.ns, per = DEC_STAGE / (G * ROW);
    const float *part = sp.part + (int64_t)blockIdx.x * ns * G * ROW;
    float mx[EPT], num[EPT], den[EPT];
#pragma unroll
    for (int k = 0; k < EPT; k++)
        mx[k] = -INFINITY, num[k] = den[k] = 0.0f;
    for (int cb = 0; cb < ns; cb += per) {
        const int nc = ns - cb < per ? ns - cb : per, n16 = nc * G * ROW / 4;
        __syncthreads(); /* the stage (or sm_o) is free */
        for (int i = threadIdx.x; i < n16; i += blockDim.x)
            cp16(sm_buf + 4 * i, part + (int64_t)cb * G * ROW + 4 * i, true);
        cp_commit();
        cp_wait<0>();
        __syncthreads();
#pragma unroll
        for (int k = 0; k < EPT; k++) {
            const int i = threadIdx.x + k * DEC_WARPS * 32, g = i / D, d = i % D;
            if (g >= G)
                break;
            const float *r = sm_buf + g * ROW;
            float m1 = mx[k];
            for (int c = 0; c < nc; c++)
                m1 = fmaxf(m1, r[c * G * ROW + D]);
            if (m1 == -INFINITY)
                continue; /* every chunk so far empty */
            const float f0 = __expf(mx[k] - m1);
            float nu = num[k] * f0, de = den[k] * f0;
#pragma unroll 4
            for (int c = 0; c < nc; c++) {
                const float *rc = r + c * G * ROW;
                const float f = __expf(rc[D] - m1); /* an empty chunk (max -inf) weighs 0 */
                nu += f * rc[d];
                de += f * rc[D + 1];
            }
            mx[k] = m1, num[k] = nu, den[k] = de;
        }
    }
#pragma unroll
    for (int k = 0; k < EPT; k++) {
        const int i = threadIdx.x + k * DEC_WARPS * 32, g = i / D, d = i % D;
        if (g < G) {
            T *o = (T *)p.o + b * p.ost[0] + (hk * G + g) * p.ost[1];
            o[d] = cu_fromf<T>(den[k] > 0 ? num[k] / den[k] : 0.0f);
        }
    }
}

/* Merges attn_decode's key chunks where it had no tickets: a block per
 * (sequence, query head), a thread per output element. */
template <typename T, int D> __global__ void __launch_bounds__(D) attn_decode_combine(cu_attn p, dec_split sp)
{
    cu_grid_wait();
    decode_merge<T, D>(p, sp, blockIdx.x / p.H, blockIdx.x % p.H, threadIdx.x);
}

/* Whether attn_decode runs these shapes. */
static bool decode_fits(const cu_attn &p)
{
    if (p.S != 1 || p.mask || p.D != p.Dv || (p.D != 64 && p.D != 128) || p.H % p.Hk || p.T > INT_MAX ||
        p.B * p.Hk > INT_MAX)
        return false;
    const int64_t G = p.H / p.Hk;
    return G <= (p.D == 64 ? 8 : 4);
}

/* Key chunks per (sequence, kv head): enough blocks for two per SM, each
 * chunk at least one round of keys at the cache's full length (a round per
 * warp, in one pass of loads, where the SMs allow). */
static int decode_chunks(int64_t B, int64_t Hk, int64_t T)
{
    const int64_t want = (2 * sm_count() + B * Hk - 1) / (B * Hk),
                  most = (T + DEC_WARPS * DEC_KEYS - 1) / (DEC_WARPS * DEC_KEYS);
    const int64_t ns = want < most ? want : most;
    return ns > 1 ? (int)(ns < DEC_MAX_CHUNKS ? ns : DEC_MAX_CHUNKS) : 1;
}

/* Bytes of the partial rows of ns key chunks for B sequences of H query heads. */
static size_t decode_part_bytes(int64_t B, int64_t H, int ns, int64_t D)
{
    return (size_t)(B * H) * (size_t)ns * (size_t)DEC_ROW(D) * sizeof(float);
}

/* Scratch for the chunks' partial rows; a bound over kv head counts, since
 * the caller knows only the query heads (fewer kv heads, more chunks). */
static size_t decode_scratch(int64_t B, int64_t H, int64_t T, int64_t D)
{
    const int ns = decode_chunks(B, 1, T);
    return ns > 1 ? decode_part_bytes(B, H, ns, D) : 0;
}

static rlx_status decode_run(const rlx_thunk *t, rlx_dtype dt, const cu_attn &p)
{
    const int64_t blocks = p.B * p.Hk;
    if (blocks > INT_MAX || p.B * p.H > INT_MAX)
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "attention grid of %lld blocks is too large", (long long)blocks);
    const size_t es = rlx_dtype_size(dt), lb = (size_t)(p.D / 32) * es; /* bytes of a lane's elements of a row */
    const bool vec = aligned_to(p.k, p.kst, es, lb) && aligned_to(p.v, p.vst, es, lb);
    dec_split sp = {decode_chunks(p.B, p.Hk, p.T), vec, (float *)p.ws};
    if (sp.ns > 1 && (!p.ws || (uintptr_t)p.ws % 16 || p.ws_bytes < decode_part_bytes(p.B, p.H, sp.ns, p.D)))
        sp.ns = 1; /* the caller gave no room: one chunk */
    const dim3 grid((unsigned)blocks, (unsigned)sp.ns);
    const int64_t G = p.H / p.Hk;
#define DEC_LAUNCH(TT)                                                                                 \
    do {                                                                                               \
        if (p.D == 64)                                                                                 \
            G <= 2 ? cu_launch(attn_decode<TT, 64, 2>, grid, DEC_WARPS * 32, 0, p, sp)                 \
                   : cu_launch(attn_decode<TT, 64, 8>, grid, DEC_WARPS * 32, 0, p, sp);                \
        else                                                                                           \
            G <= 2 ? cu_launch(attn_decode<TT, 128, 2>, grid, DEC_WARPS * 32, 0, p, sp)                \
                   : cu_launch(attn_decode<TT, 128, 4>, grid, DEC_WARPS * 32, 0, p, sp);               \
        if (sp.ns > 1 && !p.tickets)                                                                   \
            p.D == 64 ? cu_launch(attn_decode_combine<TT, 64>, (unsigned)(p.B * p.H), 64, 0, p, sp)    \
                      : cu_launch(attn_decode_combine<TT, 128>, (unsigned)(p.B * p.H), 128, 0, p, sp); \
    } while (0)
    CU_FLOAT_DISPATCH(dt, TT, DEC_LAUNCH(TT));
#undef DEC_LAUNCH
    return rlx_cu_check(t, "attention (one query row) launch");
}

rlx_status rlx_cu_attention_run(const rlx_thunk *t, rlx_dtype dt, const cu_attn *a)
{
    if (!a->B || !a->H || !a->S || !a->Dv)
        return RLX_OK;
    if (a->Hk < 1 || a->H % a->Hk)
        return rlx_cu_fail(t, RLX_ERR_INVALID_ARGUMENT, "%lld heads over %lld kv heads", (long long)a->H,
                           (long long)a->Hk);
    cu_attn p = *a;
    int64_t bh = p.B * p.H;
    if (rlx_cu_cfg.cuda_decode_attention && decode_fits(p))
        return decode_run(t, dt, p);
    if (tc_fits(dt, p.D, p.Dv)) {
        const tc_plan pl = tc_plan_of(p.B, p.H, p.S, p.T, p.D);
        tc_split sp = {1, INT_MAX, NULL};
        if (pl.ns > 1 && p.ws && p.ws_bytes >= pl.part_bytes) /* else unsplit: the caller gave no room */
            sp = (tc_split){pl.ns, pl.chunk, (float *)p.ws};
        const int w = pl.w;
        int64_t blocks = bh * pl.nq * sp.ns;
        if (blocks > INT_MAX || bh * p.S / 4 + 1 > INT_MAX)
            return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "attention grid of %lld blocks is too large", (long long)blocks);
        size_t es = rlx_dtype_size(dt);
        int vec = aligned16(p.q, p.qst, es) && aligned16(p.k, p.kst, es) && aligned16(p.v, p.vst, es);
        unsigned grid = (unsigned)blocks, cgrid = (unsigned)((bh * p.S + 3) / 4);
        const bool km = p.mask && p.mst[2] == 0;
#define TC_LAUNCH_W(TT, DD, W)                                                                    \
    (km ? cu_launch(flash_tc<TT, DD, W, true>, grid, W * 32, tc_smem(DD, sizeof(TT)), p, vec, sp) \
        : cu_launch(flash_tc<TT, DD, W, false>, grid, W * 32, tc_smem(DD, sizeof(TT)), p, vec, sp))
#define TC_LAUNCH(TT, DD)                                                                \
    do {                                                                                 \
        if (w == 8)                                                                      \
            TC_LAUNCH_W(TT, DD, 8);                                                      \
        else if (w == 4)                                                                 \
            TC_LAUNCH_W(TT, DD, 4);                                                      \
        else                                                                             \
            TC_LAUNCH_W(TT, DD, 2);                                                      \
        if (DD >= 64 && sp.ns > 1)                                                       \
            cu_launch(tc_combine<TT, DD >= 64 ? DD : 64>, cgrid, 128, 0, p, sp, 16 * w); \
    } while (0)
        if (dt == RLX_F16) {
            if (p.D == 32)
                TC_LAUNCH(__half, 32);
            else if (p.D == 64)
                TC_LAUNCH(__half, 64);
            else
                TC_LAUNCH(__half, 128);
        } else {
            if (p.D == 32)
                TC_LAUNCH(__nv_bfloat16, 32);
            else if (p.D == 64)
                TC_LAUNCH(__nv_bfloat16, 64);
            else
                TC_LAUNCH(__nv_bfloat16, 128);
        }
#undef TC_LAUNCH
#undef TC_LAUNCH_W
        return rlx_cu_check(t, "attention (tensor cores) launch");
    }
    if ((p.D == 32 && p.Dv == 32) || (p.D == 64 && p.Dv == 64)) {
        /* lanes per row: the fewest that still give ~64K threads */
        const int64_t rows = bh * p.S;
        const int gl_env = rlx_cu_cfg.cuda_attn_lanes; /* RLX_CUDA_ATTN_LANES overrides the choice (tuning) */
        const int gl = gl_env ? gl_env : rows * 4 >= 65536 ? 4 : rows * 8 >= 65536 ? 8 : 16;
        size_t es = rlx_dtype_size(dt);
        int vec = aligned16(p.k, p.kst, es) && aligned16(p.v, p.vst, es);
        int64_t blocks = bh * ((p.S + GQT / gl - 1) / (GQT / gl));
        if (blocks > INT_MAX)
            return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "attention grid of %lld blocks is too large", (long long)blocks);
        unsigned grid = (unsigned)blocks;
#define GRP_LAUNCH(TT, DD)                                              \
    do {                                                                \
        if (gl == 4)                                                    \
            cu_launch(flash_grp<TT, DD, DD, 4>, grid, GQT, 0, p, vec);  \
        else if (gl == 8)                                               \
            cu_launch(flash_grp<TT, DD, DD, 8>, grid, GQT, 0, p, vec);  \
        else                                                            \
            cu_launch(flash_grp<TT, DD, DD, 16>, grid, GQT, 0, p, vec); \
    } while (0)
        if (p.D == 32)
            CU_FLOAT_DISPATCH(dt, T, GRP_LAUNCH(T, 32));
        else
            CU_FLOAT_DISPATCH(dt, T, GRP_LAUNCH(T, 64));
#undef GRP_LAUNCH
        return rlx_cu_check(t, "attention launch");
    }
    int64_t blocks = bh * ((p.S + QPB - 1) / QPB);
    if (blocks > INT_MAX)
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "attention grid of %lld blocks is too large", (long long)blocks);
    unsigned grid = (unsigned)blocks;
    size_t smem = attn_smem(p.D, p.Dv);
    int dvl = dvl_of(p.Dv);
#define LAUNCH(TT, N) cu_launch(flash_attn<TT, N>, grid, QPB * 32, smem, p)
    CU_FLOAT_DISPATCH(dt, T, {
        switch (dvl) {
        case 1: LAUNCH(T, 1); break;
        case 2: LAUNCH(T, 2); break;
        case 4: LAUNCH(T, 4); break;
        default: LAUNCH(T, 8); break;
        }
    });
#undef LAUNCH
    return rlx_cu_check(t, "attention launch");
}

/* ------------------------------------------------------ the attention op */

static rlx_status prep_attention(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    const rlx_node_data *q = t->in_node[0], *v = t->in_node[2];
    return rlx_cu_attention_prepare(t, q->dtype, q->shape.dims[3], v->shape.dims[3]);
}

static size_t attention_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *q = &g->nodes[n->in[0]], *k = &g->nodes[n->in[1]], *v = &g->nodes[n->in[2]];
    return rlx_cu_attention_scratch(q->dtype, q->shape.dims[0], q->shape.dims[1], q->shape.dims[2], k->shape.dims[2],
                                    q->shape.dims[3], v->shape.dims[3]);
}

size_t rlx_cu_attention_keep(int64_t B, int64_t Hk, int64_t S)
{
    return S == 1 && B * Hk > 0 ? (size_t)(B * Hk) * sizeof(unsigned) : 0;
}

static size_t attention_keep(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *q = &g->nodes[n->in[0]], *k = &g->nodes[n->in[1]];
    return rlx_cu_attention_keep(q->shape.dims[0], k->shape.dims[1], q->shape.dims[2]);
}

static rlx_status k_attention(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *q = t->in_node[0], *k = t->in_node[1], *v = t->in_node[2];
    cu_attn p;
    memset(&p, 0, sizeof p);
    p.B = q->shape.dims[0];
    p.H = q->shape.dims[1];
    p.S = q->shape.dims[2];
    p.D = q->shape.dims[3];
    p.Hk = k->shape.dims[1];
    p.T = k->shape.dims[2];
    p.Dv = v->shape.dims[3];
    double scale = t->node->attrs.attention.scale;
    p.scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)p.D));
    p.causal = t->node->attrs.attention.causal;
    /* contiguous [B, H, rows, dim] */
    const int64_t qst[3] = {p.H * p.S * p.D, p.S * p.D, p.D}, kst[3] = {p.Hk * p.T * p.D, p.T * p.D, p.D},
                  vst[3] = {p.Hk * p.T * p.Dv, p.T * p.Dv, p.Dv}, ost[3] = {p.H * p.S * p.Dv, p.S * p.Dv, p.Dv};
    memcpy(p.qst, qst, sizeof qst);
    memcpy(p.kst, kst, sizeof kst);
    memcpy(p.vst, vst, sizeof vst);
    memcpy(p.ost, ost, sizeof ost);
    p.q = t->in[0];
    p.k = t->in[1];
    p.v = t->in[2];
    p.o = t->out;
    p.ws = t->scratch;
    p.ws_bytes = t->scratch_bytes;
    if (t->keep && t->keep_bytes >= rlx_cu_attention_keep(p.B, p.Hk, p.S))
        p.tickets = (unsigned *)t->keep;
    p.mask_dt = -1;
    if (t->node->attrs.attention.has_mask)
        cu_attn_mask(&p, t->in[3], t->in_node[3]);
    if (t->node->attrs.attention.has_pos) {
        p.pos = t->in[t->node->n_in - 1];
        p.pos_i32 = t->in_node[t->node->n_in - 1]->dtype == RLX_I32;
    }
    return rlx_cu_attention_run(t, q->dtype, &p);
}

static bool attention_ok(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *q = &g->nodes[n->in[0]], *v = &g->nodes[n->in[2]];
    if (!rlx_cu_attention_dims_ok(q->dtype, q->shape.dims[3], v->shape.dims[3]))
        return false;
    if (n->attrs.attention.has_mask) {
        rlx_dtype md = g->nodes[n->in[3]].dtype;
        if (md != RLX_BOOL && md != q->dtype)
            return false;
    }
    return true;
}

extern "C" void rlx_cuda_register_attention(cu_kernel *tab)
{
    tab[RLX_OP_ATTENTION] = (cu_kernel){k_attention, attention_scratch, attention_ok, prep_attention,
                                        NULL,        nullptr,           nullptr,      attention_keep};
    rlx_cuda_register_attn_grad(tab);
}
