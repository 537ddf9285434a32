/* resnet.c - ResNet-50 v1.5 (torchvision layout: stride on the 3x3 conv of
 * each bottleneck) with BatchNorm folded into conv weights and biases, as
 * inference runs it.  NCHW. */
#include <stdio.h>

#include "models/workloads.h"

static rlx_node conv(rlx_graph *g, rlx_node x, const char *name, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                     rlx_dtype t)
{
    char w[96], b[96];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.stride[0] = p.stride[1] = stride;
    p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = k / 2;
    rlx_node wn = rlx_param(g, w, t, 4, (int64_t[]){cout, cin, k, k});
    rlx_node bn = rlx_param(g, b, t, 1, (int64_t[]){cout});
    return rlx_conv(g, x, wn, bn, &p);
}

static rlx_node bottleneck(rlx_graph *g, rlx_node x, const char *name, int64_t cin, int64_t width, int64_t stride,
                           rlx_dtype t)
{
    char n[96];
    int64_t cout = width * 4;
    snprintf(n, sizeof n, "%s.conv1", name);
    rlx_node y = rlx_relu(g, conv(g, x, n, cin, width, 1, 1, t));
    snprintf(n, sizeof n, "%s.conv2", name);
    y = rlx_relu(g, conv(g, y, n, width, width, 3, stride, t));
    snprintf(n, sizeof n, "%s.conv3", name);
    y = conv(g, y, n, width, cout, 1, 1, t);
    rlx_node skip = x;
    if (stride != 1 || cin != cout) {
        snprintf(n, sizeof n, "%s.down", name);
        skip = conv(g, x, n, cin, cout, 1, stride, t);
    }
    return rlx_relu(g, rlx_add(g, y, skip));
}

rlx_graph *rlx_workload_resnet50(int batch, rlx_dtype t)
{
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return NULL;
    rlx_node x = rlx_input(g, "image", t, 4, (int64_t[]){batch, 3, 224, 224});
    x = rlx_relu(g, conv(g, x, "stem", 3, 64, 7, 2, t));
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 3);
    pp.stride[0] = pp.stride[1] = 2;
    pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = 1;
    x = rlx_max_pool(g, x, &pp);
    static const int blocks[4] = {3, 4, 6, 3};
    int64_t cin = 64;
    for (int s = 0; s < 4; s++) {
        int64_t width = 64 << s;
        for (int b = 0; b < blocks[s]; b++) {
            char name[64];
            snprintf(name, sizeof name, "layer%d.%d", s + 1, b);
            x = bottleneck(g, x, name, cin, width, (b == 0 && s > 0) ? 2 : 1, t);
            cin = width * 4;
        }
    }
    x = rlx_reshape(g, rlx_global_avg_pool(g, x), 2, (int64_t[]){batch, 2048});
    rlx_node w = rlx_param(g, "fc.w", t, 2, (int64_t[]){2048, 1000});
    rlx_node b = rlx_param(g, "fc.b", t, 1, (int64_t[]){1000});
    rlx_output(g, "logits", rlx_add(g, rlx_matmul(g, x, w, 0, 0), b));
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}
