/* k_attn_grad.cu - attention's gradient (attention_grad: dq, dk and dv
 * side by side) on tensor cores, flash style: scores and probabilities are
 * recomputed tile by tile from q, k and each query row's log-sum-exp, never
 * stored.  Two kernels, in order:
 *   ag_dq   a block per 64 query rows of a head (4 warps x 16 rows): a
 *           first pass over the key tiles gives each row's log-sum-exp
 *           (base 2), and the row's delta = dy . o (the softmax gradient's
 *           row sum) comes from dy and o; both go to scratch.  A second pass
 *           computes P, dP = dy V^T, dS = P (dP - delta) and dq = scale dS K.
 *   ag_dkv  a block per 64 keys of a kv head (4 warps x 16 keys): over the
 *           query tiles of every head of its group (from the causal
 *           diagonal on), P^T and dS^T again from the stored statistics,
 *           dv = P^T dy and dk = scale dS^T q.  Each block owns its keys'
 *           dk and dv: no atomics, the same sums in the same order every run.
 * f16/bf16 with D == Dv in {32, 64, 128}, contiguous [B, H, rows, D]
 * operands; causal (key t visible to row s when t <= s + T - S), and a bool
 * or additive mask broadcast to [B, H, S, T].  Fragment layouts and the
 * ldmatrix addressing are k_attention.cu's (cuda_attn_tc.h). */
#include <math.h>
#include <string.h>

#include "backends/cuda/cuda_attn_tc.h"

#define AG_QB 64 /* query rows per ag_dq block */
#define AG_KT 32 /* keys per ag_dq tile */
#define AG_KB 64 /* keys per ag_dkv block */
#define AG_QT 32 /* query rows per ag_dkv tile */

typedef struct ag_args {
    int64_t B, H, Hk, S, T;
    float scale;
    int causal;
    const void *q, *k, *v, *o, *dy;
    void *dq, *dk, *dv;
    const void *mask; /* NULL: none */
    int mask_dt;      /* RLX_BOOL or the data dtype */
    int64_t mst[4];   /* mask strides over [B, H, S, T] (0: broadcast) */
    float *lse;       /* [B * H * S] base-2 log-sum-exp of the scaled scores (+inf: no key visible) */
    float *delta;     /* [B * H * S] dy . o */
} ag_args;

/* x (a base-2 scaled score of row s, key t) with the masks applied: -inf
 * where the key is hidden from the row, or either is past its end. */
template <typename T>
__device__ __forceinline__ float ag_masked(const ag_args &p, int64_t b, int64_t h, int64_t s, int64_t t, float x)
{
    if (s >= p.S || t >= p.T || (p.causal && t > s + p.T - p.S))
        return -INFINITY;
    if (p.mask) {
        const int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
        if (p.mask_dt == RLX_BOOL)
            return ((const unsigned char *)p.mask)[mo] ? x : -INFINITY;
        x += cu_tof<T>(((const T *)p.mask)[mo]) * LOG2E_F;
    }
    return x;
}

/* The f32 pair a packed f16/bf16 operand word holds. */
__device__ __forceinline__ float2 ag_unpack(uint32_t w, __half) { return __half22float2(*(const __half2 *)&w); }
__device__ __forceinline__ float2 ag_unpack(uint32_t w, __nv_bfloat16)
{
    return __bfloat1622float2(*(const __nv_bfloat162 *)&w);
}

/* acc[NT][4] (16 rows x 8 NT columns) += A (16 x D, fragments af[D / 16])
 * times the rows of a tile stored [n][LD] (n the output column, D along
 * the row): B fragments by ldmatrix, two 16-wide k chunks per load. */
template <typename T, int D, int NT, int LD>
__device__ __forceinline__ void ag_rows_times(float (*acc)[4], const uint32_t (*af)[4], const T *tile, int lane)
{
#pragma unroll
    for (int j = 0; j < NT; j++) {
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        const T *r = tile + (j * 8 + (lane & 7)) * LD + (lane >> 3) * 8;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
            uint32_t bf[4];
            tc_ldsm_x4<false>(bf, r + kk * 16);
            tc_mma(acc[j], af[kk], bf[0], bf[1], T());
            tc_mma(acc[j], af[kk + 1], bf[2], bf[3], T());
        }
    }
}

/* out[D / 8][4] (16 x D) += A (16 x KW, from f32 accumulators x[KW / 8][4]
 * rounded to T) times a tile stored [KW][LD] (k along the rows). */
template <typename T, int D, int KW, int LD>
__device__ __forceinline__ void ag_acc_times(float (*out)[4], const float (*x)[4], const T *tile, int lane)
{
#pragma unroll
    for (int kk = 0; kk < KW / 16; kk++) {
        const uint32_t a[4] = {tc_pack(x[2 * kk][0], x[2 * kk][1], T()), tc_pack(x[2 * kk][2], x[2 * kk][3], T()),
                               tc_pack(x[2 * kk + 1][0], x[2 * kk + 1][1], T()),
                               tc_pack(x[2 * kk + 1][2], x[2 * kk + 1][3], T())};
        const T *r = tile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
        for (int n = 0; n < D / 16; n++) {
            uint32_t bf[4];
            tc_ldsm_x4<true>(bf, r + n * 16);
            tc_mma(out[2 * n], a, bf[0], bf[1], T());
            tc_mma(out[2 * n + 1], a, bf[2], bf[3], T());
        }
    }
}

/* 16 rows x D from global (row stride D) as A fragments; rows past n are zeros. */
template <typename T, int D>
__device__ __forceinline__ void ag_frags(uint32_t (*f)[4], const T *base, int64_t r0, int64_t n, int g, int tg, int vec)
{
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int col = kk * 16 + c * 8 + 2 * tg;
            f[kk][2 * c] = r0 + g < n ? tc_q32(base + (r0 + g) * D + col, vec) : 0u;
            f[kk][2 * c + 1] = r0 + g + 8 < n ? tc_q32(base + (r0 + g + 8) * D + col, vec) : 0u;
        }
}

/* 16 rows x D of an accumulator (times mul) to global rows [r0, n), row stride D. */
template <typename T, int D>
__device__ __forceinline__ void ag_store(T *base, const float (*acc)[4], float mul, int64_t r0, int64_t n, int g,
                                         int tg)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int64_t row = r0 + g + 8 * r;
        if (row >= n)
            continue;
        T *o = base + row * D;
#pragma unroll
        for (int j = 0; j < D / 8; j++)
            *(uint32_t *)(o + j * 8 + 2 * tg) = tc_pack(acc[j][2 * r] * mul, acc[j][2 * r + 1] * mul, T());
    }
}

/* Shared memory of each kernel: ag_dq two buffers each of key and value
 * tiles; ag_dkv its keys and values, then two buffers each of q and dy
 * tiles and of their rows' statistics. */
static constexpr size_t ag_dq_smem(int D, int es) { return (size_t)4 * AG_KT * TC_LD(D) * es; }
static constexpr size_t ag_dkv_smem(int D, int es)
{
    return (size_t)(2 * AG_KB + 4 * AG_QT) * TC_LD(D) * es + (size_t)4 * AG_QT * sizeof(float);
}

template <typename T, int D> __global__ void __launch_bounds__(128, D == 128 ? 1 : 2) ag_dq(ag_args p, int vec)
{
    cu_grid_wait();
    constexpr int LD = TC_LD(D), NT = AG_KT / 8, KD = D / 16, ND = D / 8;
    extern __shared__ __align__(16) unsigned char ag_sh[];
    T(*ks)[AG_KT * LD] = (T(*)[AG_KT * LD]) ag_sh;
    T(*vs)[AG_KT * LD] = (T(*)[AG_KT * LD])(ag_sh + (size_t)2 * AG_KT * LD * sizeof(T));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    /* block -> head and query rows, in 32-bit arithmetic; causal: the rows
     * with the most keys first */
    const unsigned nq = (unsigned)((p.S + AG_QB - 1) / AG_QB), bh = blockIdx.x / nq, qb = blockIdx.x % nq;
    const int64_t b = bh / (unsigned)p.H, h = bh % (unsigned)p.H, hk = h / (p.H / p.Hk);
    const int64_t q0 = (int64_t)(p.causal ? nq - 1 - qb : qb) * AG_QB, w0 = q0 + warp * 16, shift = p.T - p.S;
    const int64_t row_of = (b * p.H + h) * p.S; /* index of this head's row 0 */
    const T *qh = (const T *)p.q + row_of * D, *oh = (const T *)p.o + row_of * D, *dyh = (const T *)p.dy + row_of * D;
    const T *kh = (const T *)p.k + (b * p.Hk + hk) * p.T * D, *vh = (const T *)p.v + (b * p.Hk + hk) * p.T * D;
    const int64_t rows[2] = {w0 + g, w0 + g + 8};

    uint32_t qf[KD][4], df[KD][4];
    ag_frags<T, D>(qf, qh, w0, p.S, g, tg, vec);
    ag_frags<T, D>(df, dyh, w0, p.S, g, tg, vec);
    /* delta = dy . o over this thread's columns, then over the quad */
    float dl[2] = {0.0f, 0.0f};
#pragma unroll
    for (int kk = 0; kk < KD; kk++)
#pragma unroll
        for (int c = 0; c < 2; c++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                if (rows[r] >= p.S)
                    continue;
                const int col = kk * 16 + c * 8 + 2 * tg;
                const float2 d = ag_unpack(df[kk][2 * c + r], T());
                const T *orow = oh + rows[r] * D + col;
                dl[r] += d.x * cu_tof<T>(orow[0]) + d.y * cu_tof<T>(orow[1]);
            }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        dl[r] += __shfl_xor_sync(0xffffffffu, dl[r], 1);
        dl[r] += __shfl_xor_sync(0xffffffffu, dl[r], 2);
    }

    const float sl2 = p.scale * LOG2E_F;
    const int64_t w_last = w0 + 15 < p.S - 1 ? w0 + 15 : p.S - 1;
    int64_t t_end = p.T;
    if (p.causal) {
        const int64_t lim = (q0 + AG_QB - 1 < p.S - 1 ? q0 + AG_QB - 1 : p.S - 1) + shift + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    const int n_tiles = (int)((t_end + AG_KT - 1) / AG_KT);
    const bool live = w0 < p.S;
    /* scores of this warp's rows against key tile kt (from key t0), base 2, masked */
    auto scores = [&](float(*sc)[4], const T *kt, int64_t t0) {
        ag_rows_times<T, D, NT, LD>(sc, qf, kt, lane);
        const bool edge = (p.causal && t0 + AG_KT - 1 > w0 + shift) || t0 + AG_KT > p.T || p.mask;
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = sc[j][e] * sl2;
                if (edge)
                    x = ag_masked<T>(p, b, h, rows[e >> 1], t0 + j * 8 + 2 * tg + (e & 1), x);
                sc[j][e] = x;
            }
    };

    /* pass 1: each row's max and sum of 2^(x - max) */
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    if (n_tiles > 0)
        load_rows<T, T, AG_KT, D, LD, 128>(ks[0], kh, D, 0, p.T, vec);
    for (int it = 0; it < n_tiles; it++) {
        const int64_t t0 = (int64_t)it * AG_KT;
        const int buf = it & 1;
        if (it + 1 < n_tiles) {
            load_rows<T, T, AG_KT, D, LD, 128>(ks[buf ^ 1], kh, D, t0 + AG_KT, p.T, vec);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (live && !(p.causal && t0 > w_last + shift)) {
            float sc[NT][4];
            scores(sc, ks[buf], t0);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < NT; j++)
                    mx = fmaxf(mx, fmaxf(sc[j][2 * r], sc[j][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mn = fmaxf(m[r], mx), base = mn == -INFINITY ? 0.0f : mn;
                float sum = 0.0f;
#pragma unroll
                for (int j = 0; j < NT; j++)
                    sum += exp2f(sc[j][2 * r] - base) + exp2f(sc[j][2 * r + 1] - base);
                l[r] = l[r] * exp2f(m[r] - base) + sum;
                m[r] = mn;
            }
        }
        __syncthreads();
    }
    float lse[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        lse[r] = m[r] == -INFINITY ? INFINITY : m[r] + log2f(l[r]);
        if (tg == 0 && rows[r] < p.S) {
            p.lse[row_of + rows[r]] = lse[r];
            p.delta[row_of + rows[r]] = dl[r];
        }
    }

    /* pass 2: dq += dS K over the same tiles */
    float dq[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    if (n_tiles > 0) {
        load_rows<T, T, AG_KT, D, LD, 128>(ks[0], kh, D, 0, p.T, vec);
        load_rows<T, T, AG_KT, D, LD, 128>(vs[0], vh, D, 0, p.T, vec);
    }
    for (int it = 0; it < n_tiles; it++) {
        const int64_t t0 = (int64_t)it * AG_KT;
        const int buf = it & 1;
        if (it + 1 < n_tiles) {
            load_rows<T, T, AG_KT, D, LD, 128>(ks[buf ^ 1], kh, D, t0 + AG_KT, p.T, vec);
            load_rows<T, T, AG_KT, D, LD, 128>(vs[buf ^ 1], vh, D, t0 + AG_KT, p.T, vec);
            cp_wait<2>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (live && !(p.causal && t0 > w_last + shift)) {
            float sc[NT][4], dp[NT][4];
            scores(sc, ks[buf], t0);
            ag_rows_times<T, D, NT, LD>(dp, df, vs[buf], lane);
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sc[j][e] = exp2f(sc[j][e] - lse[e >> 1]) * (dp[j][e] - dl[e >> 1]);
            ag_acc_times<T, D, AG_KT, LD>(dq, sc, ks[buf], lane);
        }
        __syncthreads();
    }
    if (live)
        ag_store<T, D>((T *)p.dq + row_of * D, dq, p.scale, w0, p.S, g, tg);
}

template <typename T, int D> __global__ void __launch_bounds__(128, D == 128 ? 1 : 2) ag_dkv(ag_args p, int vec)
{
    cu_grid_wait();
    constexpr int LD = TC_LD(D), NT = AG_QT / 8, KD = D / 16, ND = D / 8;
    extern __shared__ __align__(16) unsigned char ag_sh[];
    T *kblk = (T *)ag_sh, *vblk = kblk + AG_KB * LD;
    T(*qs)[AG_QT * LD] = (T(*)[AG_QT * LD])(vblk + AG_KB * LD);
    T(*ys)[AG_QT * LD] = (T(*)[AG_QT * LD])(vblk + AG_KB * LD + 2 * AG_QT * LD);
    float(*lse_s)[AG_QT] = (float(*)[AG_QT])(vblk + AG_KB * LD + 4 * AG_QT * LD);
    float(*del_s)[AG_QT] = lse_s + 2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    const unsigned nk = (unsigned)((p.T + AG_KB - 1) / AG_KB), bhk = blockIdx.x / nk;
    const int64_t b = bhk / (unsigned)p.Hk, hk = bhk % (unsigned)p.Hk, G = p.H / p.Hk;
    const int64_t k0 = (int64_t)(blockIdx.x % nk) * AG_KB, wk0 = k0 + warp * 16, shift = p.T - p.S;
    const int64_t kv_of = (b * p.Hk + hk) * p.T; /* index of this kv head's key 0 */
    const int64_t keys[2] = {wk0 + g, wk0 + g + 8};
    load_rows<T, T, AG_KB, D, LD, 128>(kblk, (const T *)p.k + kv_of * D, D, k0, p.T, vec);
    load_rows<T, T, AG_KB, D, LD, 128>(vblk, (const T *)p.v + kv_of * D, D, k0, p.T, vec);
    /* the first query row that sees key k0 */
    int64_t s_start = p.causal ? k0 - shift : 0;
    s_start = s_start < 0 ? 0 : s_start / AG_QT * AG_QT;
    const int64_t n_qt = s_start < p.S ? (p.S - s_start + AG_QT - 1) / AG_QT : 0, n_it = G * n_qt;
    auto load_tile = [&](int64_t i, int buf) {
        const int64_t h = hk * G + i / n_qt, s0 = s_start + (i % n_qt) * AG_QT, row_of = (b * p.H + h) * p.S;
        load_rows<T, T, AG_QT, D, LD, 128>(qs[buf], (const T *)p.q + row_of * D, D, s0, p.S, vec);
        load_rows<T, T, AG_QT, D, LD, 128>(ys[buf], (const T *)p.dy + row_of * D, D, s0, p.S, vec);
        if (threadIdx.x < AG_QT) {
            const int64_t s = s0 + threadIdx.x;
            lse_s[buf][threadIdx.x] = s < p.S ? p.lse[row_of + s] : INFINITY;
            del_s[buf][threadIdx.x] = s < p.S ? p.delta[row_of + s] : 0.0f;
        }
    };
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++) {
        dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.0f;
        dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
    }
    const float sl2 = p.scale * LOG2E_F;
    const bool live = wk0 < p.T;
    if (n_it > 0)
        load_tile(0, 0);
    for (int64_t i = 0; i < n_it; i++) {
        const int buf = (int)(i & 1);
        const int64_t h = hk * G + i / n_qt, s0 = s_start + (i % n_qt) * AG_QT;
        if (i + 1 < n_it) {
            load_tile(i + 1, buf ^ 1);
            cp_wait<2>(); /* the K/V block and this tile's two groups have landed */
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        /* warp-uniform skip: no key of this warp, or every row of the tile before its first key */
        if (live && !(p.causal && s0 + AG_QT - 1 + shift < wk0)) {
            uint32_t kf[KD][4];
            const T *ka = kblk + (warp * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
#pragma unroll
            for (int kk = 0; kk < KD; kk++)
                tc_ldsm_x4<false>(kf[kk], ka + kk * 16);
            float st[NT][4];
            ag_rows_times<T, D, NT, LD>(st, kf, qs[buf], lane);
            const bool edge = (p.causal && wk0 + 15 > s0 + shift) || s0 + AG_QT > p.S || wk0 + 16 > p.T || p.mask;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = j * 8 + 2 * tg + (e & 1); /* the tile's query row */
                    float x = st[j][e] * sl2;
                    if (edge)
                        x = ag_masked<T>(p, b, h, s0 + c, keys[e >> 1], x);
                    st[j][e] = exp2f(x - lse_s[buf][c]);
                }
            ag_acc_times<T, D, AG_QT, LD>(dv, st, ys[buf], lane);
            const T *va = vblk + (warp * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
#pragma unroll
            for (int kk = 0; kk < KD; kk++)
                tc_ldsm_x4<false>(kf[kk], va + kk * 16);
            float dp[NT][4];
            ag_rows_times<T, D, NT, LD>(dp, kf, ys[buf], lane);
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    dp[j][e] = st[j][e] * (dp[j][e] - del_s[buf][j * 8 + 2 * tg + (e & 1)]);
            ag_acc_times<T, D, AG_QT, LD>(dk, dp, qs[buf], lane);
        }
        __syncthreads(); /* this buffer is refilled next */
    }
    if (n_it == 0)
        cp_wait<0>();
    if (live) {
        ag_store<T, D>((T *)p.dk + kv_of * D, dk, p.scale, wk0, p.T, g, tg);
        ag_store<T, D>((T *)p.dv + kv_of * D, dv, 1.0f, wk0, p.T, g, tg);
    }
}

/* ------------------------------------------------------------- host side */

static bool ag_fits(rlx_dtype dt, int64_t D, int64_t Dv)
{
    return (dt == RLX_F16 || dt == RLX_BF16) && D == Dv && (D == 32 || D == 64 || D == 128) && rlx_cu_dev->major >= 8 &&
           !rlx_cu_cfg.cuda_no_tc_attention;
}

static bool attention_grad_ok(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *q = &g->nodes[n->in[0]], *k = &g->nodes[n->in[1]], *v = &g->nodes[n->in[2]];
    if (!ag_fits(q->dtype, q->shape.dims[3], v->shape.dims[3]))
        return false;
    if (n->attrs.attention.has_mask) {
        rlx_dtype md = g->nodes[n->in[5]].dtype;
        if (md != RLX_BOOL && md != q->dtype)
            return false;
    }
    const int64_t B = q->shape.dims[0], H = q->shape.dims[1], S = q->shape.dims[2], Hk = k->shape.dims[1],
                  T = k->shape.dims[2];
    return B * H * ((S + AG_QB - 1) / AG_QB) < INT_MAX && B * Hk * ((T + AG_KB - 1) / AG_KB) < INT_MAX;
}

/* each query row's log-sum-exp and delta */
static size_t ag_scratch_bytes(const rlx_shape *q)
{
    return (size_t)2 * (size_t)(q->dims[0] * q->dims[1] * q->dims[2]) * sizeof(float);
}

static size_t attention_grad_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    return ag_scratch_bytes(&g->nodes[n->in[0]].shape);
}

template <typename T, int D> static cudaError_t ag_allow_smem(void)
{
    cudaError_t e = cudaSuccess;
    if (ag_dq_smem(D, sizeof(T)) > 48 * 1024)
        e = cudaFuncSetAttribute((const void *)ag_dq<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)ag_dq_smem(D, sizeof(T)));
    if (e == cudaSuccess && ag_dkv_smem(D, sizeof(T)) > 48 * 1024)
        e = cudaFuncSetAttribute((const void *)ag_dkv<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)ag_dkv_smem(D, sizeof(T)));
    return e;
}

template <typename T> static cudaError_t ag_allow_smem_dt(int64_t D)
{
    return D == 32 ? ag_allow_smem<T, 32>() : D == 64 ? ag_allow_smem<T, 64>() : ag_allow_smem<T, 128>();
}

static rlx_status prep_attention_grad(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    const rlx_node_data *q = t->in_node[0];
    cudaError_t e = q->dtype == RLX_F16 ? ag_allow_smem_dt<__half>(q->shape.dims[3])
                                        : ag_allow_smem_dt<__nv_bfloat16>(q->shape.dims[3]);
    return e == cudaSuccess ? RLX_OK : rlx_cu_error(t, e, "attention gradient shared memory");
}

template <typename T, int D> static void ag_launch(const ag_args &p, unsigned gq, unsigned gkv, int vec)
{
    if (gq)
        cu_launch(ag_dq<T, D>, gq, 128, ag_dq_smem(D, sizeof(T)), p, vec);
    if (gkv)
        cu_launch(ag_dkv<T, D>, gkv, 128, ag_dkv_smem(D, sizeof(T)), p, vec);
}

template <typename T> static void ag_launch_dt(const ag_args &p, int64_t D, unsigned gq, unsigned gkv, int vec)
{
    if (D == 32)
        ag_launch<T, 32>(p, gq, gkv, vec);
    else if (D == 64)
        ag_launch<T, 64>(p, gq, gkv, vec);
    else
        ag_launch<T, 128>(p, gq, gkv, vec);
}

static rlx_status k_attention_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *q = t->in_node[0], *k = t->in_node[1];
    ag_args p;
    memset(&p, 0, sizeof p);
    p.B = q->shape.dims[0];
    p.H = q->shape.dims[1];
    p.S = q->shape.dims[2];
    p.Hk = k->shape.dims[1];
    p.T = k->shape.dims[2];
    const int64_t D = q->shape.dims[3], nq = rlx_shape_numel(&q->shape), nk = rlx_shape_numel(&k->shape);
    const double scale = n->attrs.attention.scale;
    p.scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)D));
    p.causal = n->attrs.attention.causal;
    p.q = t->in[0], p.k = t->in[1], p.v = t->in[2], p.o = t->in[3], p.dy = t->in[4];
    const size_t es = rlx_dtype_size(q->dtype);
    p.dq = t->out;
    p.dk = (char *)t->out + (size_t)nq * es;
    p.dv = (char *)t->out + (size_t)(nq + nk) * es;
    p.mask_dt = -1;
    if (n->attrs.attention.has_mask) {
        const rlx_node_data *mn = t->in_node[5];
        rlx_shape full = {4, {p.B, p.H, p.S, p.T}};
        int64_t st[RLX_MAX_DIMS];
        rlx_shape_broadcast_strides(&mn->shape, &full, st);
        memcpy(p.mst, st, sizeof p.mst);
        p.mask = t->in[5];
        p.mask_dt = mn->dtype;
    }
    p.lse = (float *)t->scratch;
    p.delta = p.lse + p.B * p.H * p.S;
    if (t->scratch_bytes < ag_scratch_bytes(&q->shape))
        return rlx_cu_fail(t, RLX_ERR_INTERNAL, "attention gradient scratch of %zu bytes is too small",
                           t->scratch_bytes);
    const unsigned gq = (unsigned)(p.B * p.H * ((p.S + AG_QB - 1) / AG_QB)),
                   gkv = (unsigned)(p.B * p.Hk * ((p.T + AG_KB - 1) / AG_KB));
    int vec = 1;
    for (int j = 0; j < 5; j++)
        vec &= (uintptr_t)t->in[j] % 16 == 0;
    if (q->dtype == RLX_F16)
        ag_launch_dt<__half>(p, D, gq, gkv, vec);
    else
        ag_launch_dt<__nv_bfloat16>(p, D, gq, gkv, vec);
    return rlx_cu_check(t, "attention gradient launch");
}

extern "C" void rlx_cuda_register_attn_grad(cu_kernel *tab)
{
    tab[RLX_OP_ATTENTION_GRAD] =
        (cu_kernel){k_attention_grad, attention_grad_scratch, attention_grad_ok, prep_attention_grad, NULL};
}
