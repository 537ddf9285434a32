/* cli_args.c - option values of the `rlx` program's commands, parsed one
 * way everywhere: the whole text must be the number, in range, else a
 * message naming the command, the option and what it got. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_parse_long(const char *cmd, const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "rlx %s: %s needs an integer from %ld to %ld, got '%s'\n", cmd, flag, lo, hi, v ? v : "");
        return 1;
    }
    *out = x;
    return 0;
}

int cli_parse_double(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "rlx %s: %s needs a number from %g to %g, got '%s'\n", cmd, flag, lo, hi, v ? v : "");
        return 1;
    }
    *out = x;
    return 0;
}
