/* cuda_jit.h - kernels generated at compile time and built by NVRTC
 * (jit.cu): a kernel whose source is known only once the graph is, such as
 * an elementwise chain written out as straight-line code instead of
 * interpreted instruction by instruction.  NVRTC is opened at run time
 * (dlopen: no link dependency); where it is missing, or a source fails to
 * build, the caller keeps its general kernel. */
#ifndef RLX_CUDA_JIT_H
#define RLX_CUDA_JIT_H

#include "backends/cuda/cuda_common.h"

/* One built kernel, shared by every thunk whose generated source is the
 * same (the cache key is the source and the device's architecture). */
typedef struct cu_jit cu_jit;

/* Builds (or finds) kernel `name` of `src` for the current device; the
 * source may include "ir/op_math.h" (the elementwise math, with the op ids
 * it uses defined before it).  NULL where NVRTC is not there, the device
 * is older than sm_80 or the build fails (RLX_VERBOSE says why). */
cu_jit *rlx_cu_jit_get(const char *src, const char *name);
/* Builds src for sm_<arch> without loading it (no device needed): 1
 * built, 0 failed (NVRTC's log into log), -1 no NVRTC. */
int rlx_cu_jit_try_build(const char *src, int arch, char *log, size_t log_bytes);
/* Drops a reference; the kernel's module is unloaded with the last. */
void rlx_cu_jit_put(cu_jit *j);
/* Launches it on the backend's stream with one argument (the address of
 * a struct passed by value), configured as cu_launch's (cu_launch_config);
 * the kernel must begin with griddepcontrol's launch_dependents and wait,
 * as cu_grid_wait does. */
void rlx_cu_jit_launch(const cu_jit *j, unsigned grid, unsigned block, void *arg);
/* Kernels built so far in the process (C linkage: the GPU tests, in C,
 * see that the path ran). */
extern "C" long rlx_cu_jit_built(void);

#endif
