/* cpu_window.h - a conv or pool window over 1 or 2 spatial dims, shared by
 * the convolution (kernels_conv.c) and pooling (kernels_nn.c) kernels. */
#ifndef RLX_CPU_WINDOW_H
#define RLX_CPU_WINDOW_H

#include "backends/cpu/cpu_kernels.h"

/* Seen as 2-d (1-d: H = 1). */
typedef struct window2d {
    int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
} window2d;

static inline window2d conv_window(const rlx_shape *x, const rlx_shape *y, int64_t kh, int64_t kw,
                                   const int64_t *stride, const int64_t *dil, const int64_t *pads)
{
    window2d w;
    if (x->ndim == 3) {
        w = (window2d){1, x->dims[2], 1, y->dims[2], 1, kw, 1, stride[0], 1, dil[0], 0, pads[0]};
    } else {
        w = (window2d){x->dims[2], x->dims[3], y->dims[2], y->dims[3], kh,      kw,
                       stride[0],  stride[1],  dil[0],     dil[1],     pads[0], pads[1]};
    }
    return w;
}

/* First and one-past-last tap k in [0, K) whose position start + k*dil lies
 * in [lo, hi). */
static inline int64_t tap_lo(int64_t start, int64_t lo, int64_t dil)
{
    return start >= lo ? 0 : (lo - start + dil - 1) / dil;
}

static inline int64_t tap_hi(int64_t start, int64_t hi, int64_t dil, int64_t K)
{
    if (start >= hi)
        return 0;
    int64_t k = (hi - start + dil - 1) / dil;
    return k < K ? k : K;
}

#endif
