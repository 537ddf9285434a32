/* env.c - options and the environment variables that override them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
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

size_t rlx_parse_size(const char *v)
{
    if (!v || *v < '0' || *v > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno)
        return 0;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && end[0] == 'i' && end[1] == 'B')
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    if (*end || x == 0 || x > (SIZE_MAX >> shift))
        return 0;
    return (size_t)x << shift;
}

size_t rlx_available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    size_t kb = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
                break;
        fclose(f);
    }
    if (kb)
        return kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

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
    const char *lim = getenv("RLX_MAX_ARENA");
    if (lim && *lim) {
        size_t b = rlx_parse_size(lim);
        if (b)
            o->max_arena_bytes = b;
        else
            fprintf(stderr, "[rlx] note: RLX_MAX_ARENA=%s is not a size (such as 512M or 2G); ignored\n", lim);
    }
    int t = rlx_env_int("RLX_THREADS", 0);
    if (t > 0)
        o->threads = t;
}
