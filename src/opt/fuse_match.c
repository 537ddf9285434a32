/* fuse_match.c - what every fusion pattern (fuse_patterns.c, and the
 * elementwise chain in fuse.c) shares: an op's fused activation and the
 * commit of a match, asked of the target first.  Below fuse.c, which runs
 * the patterns, and the patterns. */
#include <stdlib.h>

#include "opt/fuse_internal.h"

/* The fused activation op is (its row's), or -1. */
int fs_act_of(rlx_op op)
{
    const rlx_op_info *i = rlx_op_info_of(op);
    return i && i->act != RLX_ACT_NONE ? (int)i->act : -1;
}

void fs_spec_free(fuse_spec *sp)
{
    for (int k = 0; k < sp->n_consts; k++) {
        free(sp->consts[k].data);
        sp->consts[k].data = NULL;
    }
    sp->n_consts = 0;
}

bool fs_commit(fuse_state *s, fuse_spec *spec, const rlx_node *nodes, int n_nodes)
{
    rlx_dtype dt[RLX_MAX_INPUTS];
    rlx_shape sh[RLX_MAX_INPUTS];
    for (int i = 0; i < spec->node.n_in; i++) {
        rlx_node in = spec->node.in[i];
        const rlx_node_data *src = in >= 0 ? fs_node(s, in) : &spec->consts[-1 - in];
        dt[i] = src->dtype;
        sh[i] = src->shape;
    }
    if (!rlx_probe_claim(s->ctx, &spec->node, dt, sh)) {
        if (s->stats)
            s->stats->fusion_refused++;
        fs_spec_free(spec);
        return false;
    }
    if (s->n_specs == s->cap_specs) {
        int cap = s->cap_specs ? s->cap_specs * 2 : 16;
        fuse_spec *p = rlx_realloc_array(s->specs, (size_t)cap, sizeof *p);
        if (!p) {
            fs_spec_free(spec);
            return false;
        }
        s->specs = p;
        s->cap_specs = cap;
    }
    spec->node.name = s->g->nodes[spec->root].name;
    s->spec_of[spec->root] = s->n_specs;
    s->specs[s->n_specs++] = *spec;
    for (int i = 0; i < n_nodes; i++)
        s->taken[nodes[i]] = true;
    s->taken[spec->root] = true;
    return true;
}
