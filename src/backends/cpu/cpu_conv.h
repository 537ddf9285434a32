/* cpu_conv.h - channels-last f32 convolutions through oneDNN (conv_dnnl.c),
 * for the conv kernels of kernels_conv.c and the CPU's claim. */
#ifndef RLX_CPU_CONV_H
#define RLX_CPU_CONV_H

#include "backends/cpu/cpu_kernels.h"

/* Whether a channels-last conv / conv_bias_act node runs here: f32, 2-D, a
 * primitive oneDNN can build (libdnnl.so.2 opened at first use). */
bool rlx_cpu_conv_nhwc_claim(const rlx_graph *g, const rlx_node_data *n);
/* Its primitive, reordered weights and scratchpad into t->state. */
rlx_status rlx_cpu_conv_nhwc_prepare(const rlx_graph *g, rlx_thunk *t);
/* Frees what prepare made (not t->state itself). */
void rlx_cpu_conv_nhwc_release(rlx_thunk *t);
rlx_status rlx_cpu_conv_nhwc(const rlx_thunk *t, const rlx_run_ctx *ctx);
/* How many Winograd slices the process has built so far (tests see which
 * way a conv went); -1 where oneDNN is not there. */
long rlx_cpu_conv_winograd_parts(void);

#endif
