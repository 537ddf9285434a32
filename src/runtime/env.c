/* env.c - options and the environment variables that override them. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

void rlx_options_init(rlx_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->device = RLX_DEVICE_CPU;
    o->precision = RLX_PRECISION_F32;
    o->seed = 0x5eed;
}

int rlx_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end)
        return def;
    return (int)x;
}

long rlx_cpu_count(void) { return sysconf(_SC_NPROCESSORS_ONLN); }

/* A set switch turns the behaviour on; "0" turns it off again. */
static void flag(int *field, const char *name)
{
    const char *v = getenv(name);
    if (v && *v)
        *field = strcmp(v, "0") != 0;
}

void rlx_options_apply_env(rlx_options *o)
{
    if (o->ignore_env)
        return;
    flag(&o->verbose, "RLX_VERBOSE");
    flag(&o->dispatch_report, "RLX_DISPATCH_REPORT");
    flag(&o->no_reuse, "RLX_ARENA_NO_REUSE");
    flag(&o->no_inplace, "RLX_DISABLE_INPLACE");
    flag(&o->pin_output_ancestors, "RLX_PIN_OUTPUT_ANCESTORS");
    flag(&o->no_fusion, "RLX_DISABLE_FUSION");
    flag(&o->no_amp, "RLX_DISABLE_AMP");
    flag(&o->no_simplify, "RLX_DISABLE_SIMPLIFY");
    flag(&o->no_preencode, "RLX_DISABLE_CUDA_GRAPH");
    flag(&o->no_layout, "RLX_DISABLE_LAYOUT");
    flag(&o->no_layout, "RLX_NO_LAYOUT");
    if (o->verbose)
        o->dispatch_report = 1;
    int t = rlx_env_int("RLX_THREADS", 0);
    if (t > 0)
        o->threads = t;
}
