/* onnx_ops2.c - the larger composite ONNX operators. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

static const struct {
    const char *name;
    ox_handler h;
} handlers[] = {
    {"", NULL},
};

ox_handler oxo_find_more(const char *op_type) {
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].h && !strcmp(handlers[i].name, op_type)) return handlers[i].h;
    return NULL;
}
