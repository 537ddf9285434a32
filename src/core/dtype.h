/* dtype.h - dtype helpers beyond the public ones in rlx.h (dtype.c). */
#ifndef RLX_CORE_DTYPE_H
#define RLX_CORE_DTYPE_H

#include <stdbool.h>

#include "rlx.h"

bool rlx_dtype_is_float(rlx_dtype t);
bool rlx_dtype_is_int(rlx_dtype t);

#endif
