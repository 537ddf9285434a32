/* cuda_attn_tc.h - what the attention kernels share on the device: tile
 * loads from global to shared memory (cp.async on sm_80+), the causal cut,
 * and the tensor-core pieces (mma.sync m16n8k16 with f32 accumulation,
 * ldmatrix fragment loads, packing f32 pairs into f16/bf16 operands).
 * Included by k_attention.cu (forward) and k_attn_grad.cu (gradient). */
#ifndef RLX_CUDA_ATTN_TC_H
#define RLX_CUDA_ATTN_TC_H

#include <type_traits>

#include "backends/cuda/cuda_attention.h"

#define LOG2E_F 1.4426950408889634f
/* Row length of a tile in shared memory: D padded by 8 elements, so the
 * ldmatrix rows of one fragment load hit distinct banks. */
#define TC_LD(D) ((D) + 8)

/* ------------------------------------------------ tile loads, both kinds */

/* 16 bytes global -> shared without a register round trip (sm_80+): every
 * copy of a tile is in flight at once instead of one load latency per
 * loop step.  valid == false writes zeros and reads nothing. */
__device__ __forceinline__ void cp16(void *dst, const void *src, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
#else
    *(uint4 *)dst = valid ? *(const uint4 *)src : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_commit(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/* Waits until at most N committed groups are still in flight. */
template <int N> __device__ __forceinline__ void cp_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* Rows [r0, r0 + R) of a [n, C] view (row stride rs, elements T) into dst
 * [R][LDS] (elements S) by NT threads: async 16-byte copies when S is T and
 * vec (16-byte aligned rows), else element by element, converted; rows
 * past n are zeros (their scores are masked, and 0 * garbage could be
 * NaN).  Committed as one group; visible after cp_wait and a barrier. */
template <typename T, typename S, int R, int C, int LDS, int NT>
__device__ __forceinline__ void load_rows(S *dst, const T *src, int64_t rs, int64_t r0, int64_t n, int vec)
{
    if (std::is_same<T, S>::value && vec) {
        constexpr int E = 16 / sizeof(T), CH = C / E;
        for (int i = threadIdx.x; i < R * CH; i += NT) {
            int r = i / CH, c = (i % CH) * E;
            bool ok = r0 + r < n;
            cp16(dst + r * LDS + c, ok ? (const void *)(src + (r0 + r) * rs + c) : (const void *)src, ok);
        }
    } else {
        for (int i = threadIdx.x; i < R * C; i += NT) {
            int r = i / C, c = i % C;
            dst[r * LDS + c] = cu_fromf<S>(r0 + r < n ? cu_tof<T>(src[(r0 + r) * rs + c]) : 0.0f);
        }
    }
    cp_commit();
}

/* The causal cut of sequence b: row s sees keys t <= s + shift. */
__device__ __forceinline__ int64_t attn_shift(const cu_attn &p, int64_t b)
{
    if (!p.pos)
        return p.T - p.S;
    return p.pos_i32 ? (int64_t)((const int32_t *)p.pos)[b] : ((const int64_t *)p.pos)[b];
}

__device__ __forceinline__ uint32_t tc_pack(float lo, float hi, __half)
{
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
}
__device__ __forceinline__ uint32_t tc_pack(float lo, float hi, __nv_bfloat16)
{
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

/* d (16x8 f32) += a (16x16, row) * b (16x8, col). */
__device__ __forceinline__ void tc_mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, __half)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();
#endif
}
__device__ __forceinline__ void tc_mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1, __nv_bfloat16)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();
#endif
}

/* Four 8x8 b16 matrices from shared memory: lanes 8i..8i+7 give the row
 * addresses of matrix i, whose fragment lands in r[i].  As stored (rows of
 * 8 neighbours), they are the B fragments of two m16n8k16 products whose B
 * rows are the matrices' rows; TRANS transposes each on the way. */
template <bool TRANS> __device__ __forceinline__ void tc_ldsm_x4(uint32_t *r, const void *p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
#else
    (void)p;
    r[0] = r[1] = r[2] = r[3] = 0;
    __trap();
#endif
}

template <typename T> __device__ __forceinline__ uint32_t tc_lds32(const T *p) { return *(const uint32_t *)p; }

/* Two neighbouring elements of a global row as one 32-bit word (one load
 * when 4-byte aligned, as every vec view is). */
template <typename T> __device__ __forceinline__ uint32_t tc_q32(const T *p, int vec)
{
    if (vec)
        return *(const uint32_t *)p;
    return (uint32_t) * (const unsigned short *)p | ((uint32_t) * (const unsigned short *)(p + 1) << 16);
}

#endif
