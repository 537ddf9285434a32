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

/* By default (RLX_CPU_WINOGRAD unset) Winograd takes the convs of at most
 * this many weight bytes: ResNet-50's 64-, 128- and 256-channel 3 x 3 convs (2x, 1.3x and 1.25x
 * their direct time on 2 threads) but not the 512-channel ones, whose
 * transformed weights (16/9 to 4x the plain, 9.4 MB) and scratchpads took
 * ResNet-50's peak memory from 282 to 331 MB at batch 1 and from 479 to
 * 633 MB at batch 16 for 1-3% more.  (At 1 MiB, without the 256-channel
 * convs: batch 16 7% slower for 83 MB less.) */
#define RLX_CPU_WINOGRAD_SMALL_BYTES (5 << 19)

/* How many Winograd slices the process has built so far (tests see which
 * way a conv went); -1 where oneDNN is not there. */
long rlx_cpu_conv_winograd_parts(void);

#endif
