/* A user's program: y = relu(x @ w) through the installed librlx. */
#include <math.h>
#include <stdio.h>

#include <rlx.h>

int main(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){3, 2});
    rlx_output(g, "y", rlx_relu(g, rlx_matmul(g, x, w, 0, 0)));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    float xv[6] = {1, -2, 3, 0.5f, 0.25f, -1}, wv[6] = {1, 0, 0, 1, 1, -1}, y[4];
    rlx_session_set_param(s, "w", wv, sizeof wv);
    rlx_session_set_input(s, "x", xv, sizeof xv);
    if (rlx_session_run(s) != RLX_OK || rlx_session_get_output(s, "y", y, sizeof y) != RLX_OK) {
        fprintf(stderr, "run: %s\n", rlx_last_error());
        return 1;
    }
    /* x @ w = [[4, -5], [-0.75, 1.25]] -> relu */
    const float want[4] = {4, 0, 0, 1.25f};
    for (int i = 0; i < 4; i++)
        if (fabsf(y[i] - want[i]) > 1e-6f) {
            fprintf(stderr, "y[%d] = %g, want %g\n", i, y[i], want[i]);
            return 1;
        }
    rlx_session_free(s);
    rlx_graph_free(g);
    printf("consumer ok\n");
    return 0;
}
