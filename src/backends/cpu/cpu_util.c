/* cpu_util.c - what every CPU kernel family shares: errors naming the
 * node, whether the processor's AVX-512 may be used, and conversion of a
 * tensor's elements to and from f32.  Below both the kernel files and
 * cpu_backend.c (which registers them). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"

bool rlx_cpu_avx512(const rlx_backend_settings *set)
{
    if (set && set->cpu_no_avx512)
        return false;
#ifdef RLX_HAVE_WIDE
    static int state = -1; /* asked once (cpuid can be slow in a VM) */
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (s < 0) {
        s = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi2");
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s;
#else
    return false;
#endif
}

rlx_status rlx_cpu_kernel_error(const rlx_thunk *t, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (t->node->name)
        return rlx_set_error(RLX_ERR_RUNTIME, "node %d (%s '%s'): %s", t->id, rlx_op_name(t->node->op), t->node->name,
                             msg);
    return rlx_set_error(RLX_ERR_RUNTIME, "node %d (%s): %s", t->id, rlx_op_name(t->node->op), msg);
}

void rlx_cpu_to_f32(float *dst, const void *src, rlx_dtype t, int64_t n)
{
    if (t == RLX_F32) {
        if ((const void *)dst != src)
            memcpy(dst, src, (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)rlx_load(src, t, i);
}

void rlx_cpu_from_f32(void *dst, rlx_dtype t, const float *src, int64_t n)
{
    if (t == RLX_F32) {
        if (dst != (const void *)src)
            memcpy(dst, src, (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        rlx_store(dst, t, i, src[i]);
}
