/* cpu_matmul.h - f32 matmul_bias_act with a large constant weight through
 * oneDNN's matmul primitive (matmul_dnnl.c), for kernels_fused.c. */
#ifndef RLX_CPU_MATMUL_H
#define RLX_CPU_MATMUL_H

#include "backends/cpu/cpu_kernels.h"

/* Weights of at least this many elements (4 MiB of f32) are packed for
 * oneDNN's matmul primitive: mlp's (1024 x 4096 and 4096 x 4096) ran 3-9%
 * faster than through sgemm, the encoder's (384 x 1536) slower. */
#define RLX_CPU_MATMUL_PACK_MIN ((int64_t)1 << 20)
/* ... and products of at least this many rows (measured on 128-row slices;
 * a few rows, as a classifier's head at batch 1, read the weights once
 * and are as fast through sgemm, which also splits their columns). */
#define RLX_CPU_MATMUL_PACK_MIN_ROWS 64

/* The state of a matmul_bias_act that goes through the primitive (f32, a
 * 2-D constant weight of at least RLX_CPU_MATMUL_PACK_MIN elements, at
 * least RLX_CPU_MATMUL_PACK_MIN_ROWS rows, A not transposed, an f32 bias,
 * oneDNN there) into t->state; else t->state stays NULL.  The primitives
 * are built and the weights packed at the first run. */
rlx_status rlx_cpu_matmul_dnnl_prepare(const rlx_graph *g, rlx_thunk *t);
/* Frees what the runs built (not t->state itself). */
void rlx_cpu_matmul_dnnl_release(rlx_thunk *t);
/* Builds the slices and packs the weights for the run's thread count where
 * that has not been done; false where oneDNN declined (a shape or layout
 * it has no primitive for, or memory ran out): the product then goes
 * through sgemm, for that thread count from then on. */
bool rlx_cpu_matmul_dnnl_ready(const rlx_thunk *t, const rlx_run_ctx *ctx);
/* Runs a ready product. */
rlx_status rlx_cpu_matmul_dnnl(const rlx_thunk *t, const rlx_run_ctx *ctx);

/* How many slices the process has built so far (tests see which way a
 * product went); -1 where oneDNN is not there. */
long rlx_cpu_matmul_dnnl_parts(void);

#endif
