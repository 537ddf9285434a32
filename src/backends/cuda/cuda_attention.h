/* cuda_attention.h - scaled-dot-product attention over strided views, shared
 * by the attention op (contiguous [B, H, S, D]) and the fused attention
 * block (q, k and v side by side in one [B*S, (H + 2*Hkv) * D] buffer).
 * Strides are in elements: batch, head, row; the last dim is contiguous. */
#ifndef RLX_CUDA_ATTENTION_H
#define RLX_CUDA_ATTENTION_H

#include "backends/cuda/cuda_common.h"

typedef struct cu_attn {
    int64_t B, H, Hk, S, T, D, Dv;
    float scale;
    int causal;
    const void *q, *k, *v;
    void *o;
    int64_t qst[3], kst[3], vst[3], ost[3]; /* batch, head, row */
    const void *mask;                       /* NULL: none */
    int mask_dt;                            /* RLX_BOOL or the data dtype */
    int64_t mst[4];                         /* mask strides over [B, H, S, T] (0: broadcast) */
    const void *pos;                        /* [B] positions of row 0 (causal cut pos[b] + s); NULL: T - S */
    int pos_i32;                            /* pos is i32, else i64 */
    void *ws;                               /* device scratch of rlx_cu_attention_scratch bytes, */
    size_t ws_bytes;                        /* or less: the kernels then do without */
    unsigned *tickets; /* B * Hk zeroed words kept across runs (rlx_cu_attention_keep), or NULL: one query
                          row's key chunks are then merged by a second kernel */
} cu_attn;

/* a's mask: m's values (node mn, bool or the data dtype) read as if
 * broadcast to [B, H, S, T]. */
static inline void cu_attn_mask(cu_attn *a, const void *m, const rlx_node_data *mn)
{
    rlx_shape full = {4, {a->B, a->H, a->S, a->T}};
    a->mask = m;
    a->mask_dt = mn->dtype;
    rlx_shape_broadcast_strides(&mn->shape, &full, a->mst);
}

/* Whether some kernel here runs these head dims in this dtype. */
bool rlx_cu_attention_dims_ok(rlx_dtype dt, int64_t D, int64_t Dv);
/* Once per thunk, before capture: opts kernels into the shared memory they need. */
rlx_status rlx_cu_attention_prepare(const rlx_thunk *t, rlx_dtype dt, int64_t D, int64_t Dv);
/* Device scratch the kernels use for these dims (the tensor-core kernel's
 * key split when the heads and queries alone leave SMs idle); 0 = none. */
size_t rlx_cu_attention_scratch(rlx_dtype dt, int64_t B, int64_t H, int64_t S, int64_t T, int64_t D, int64_t Dv);
/* Bytes of the tickets a one-row (decode) attention of these shapes keeps
 * across runs, at the start of its thunk's keep region; 0 = none. */
size_t rlx_cu_attention_keep(int64_t B, int64_t Hk, int64_t S);
/* Launches on the backend's stream: tensor cores (f16/bf16, D == Dv in
 * {32, 64, 128}) or the CUDA-core kernels (everything else). */
rlx_status rlx_cu_attention_run(const rlx_thunk *t, rlx_dtype dt, const cu_attn *a);

/* The attention block's table row (k_attn_block.cu), filled from
 * rlx_cuda_register_attention so the backend's init list stays as it is. */
extern "C" void rlx_cuda_register_attn_block(cu_kernel *tab);
/* attention_grad's row (k_attn_grad.cu), filled from rlx_cuda_register_attention. */
extern "C" void rlx_cuda_register_attn_grad(cu_kernel *tab);

#endif
