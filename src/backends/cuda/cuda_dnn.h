/* cuda_dnn.h - cuDNN for the CUDA backend (CUDA C++, nvcc only).
 *
 * cuDNN is optional twice over: its header must be there at build time
 * (RLX_CUDNN) and its library must load at run time (rlx_dnn_ready);
 * RLX_CUDA_NO_CUDNN=1 keeps it unloaded.  Without it convolutions run as
 * im2col + cuBLASLt and fused matmuls on cuBLASLt alone. */
#ifndef RLX_CUDA_DNN_H
#define RLX_CUDA_DNN_H

#include "backends/cuda/cuda_common.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define RLX_CUDNN 1
#endif

#ifdef RLX_CUDNN
/* The entry points used, resolved with dlsym. */
struct rlx_dnn_api {
#define DNN_FN(name) decltype(&::name) name
    DNN_FN(cudnnCreate);
    DNN_FN(cudnnSetStream);
    DNN_FN(cudnnCreateTensorDescriptor);
    DNN_FN(cudnnSetTensor4dDescriptor);
    DNN_FN(cudnnDestroyTensorDescriptor);
    DNN_FN(cudnnCreateFilterDescriptor);
    DNN_FN(cudnnSetFilter4dDescriptor);
    DNN_FN(cudnnDestroyFilterDescriptor);
    DNN_FN(cudnnCreateConvolutionDescriptor);
    DNN_FN(cudnnSetConvolution2dDescriptor);
    DNN_FN(cudnnSetConvolutionGroupCount);
    DNN_FN(cudnnSetConvolutionMathType);
    DNN_FN(cudnnDestroyConvolutionDescriptor);
    DNN_FN(cudnnFindConvolutionForwardAlgorithmEx);
    DNN_FN(cudnnConvolutionForward);
    DNN_FN(cudnnConvolutionBiasActivationForward);
    DNN_FN(cudnnCreateActivationDescriptor);
    DNN_FN(cudnnSetActivationDescriptor);
    DNN_FN(cudnnDestroyActivationDescriptor);
    /* the backend (graph) API: channels-last convs on the engines the
     * legacy calls above do not reach */
    DNN_FN(cudnnBackendCreateDescriptor);
    DNN_FN(cudnnBackendDestroyDescriptor);
    DNN_FN(cudnnBackendSetAttribute);
    DNN_FN(cudnnBackendGetAttribute);
    DNN_FN(cudnnBackendFinalize);
    DNN_FN(cudnnBackendExecute);
#undef DNN_FN
};
extern rlx_dnn_api rlx_dnn;
/* The current device's cuDNN handle (cu_device.dnn), on its stream; valid
 * once rlx_dnn_ready() said yes on this device. */
#define rlx_dnn_h (*(cudnnHandle_t *)&rlx_cu_dev->dnn)

/* Loads cuDNN once (thread-safe) and makes the current device's handle
 * (rlx_dnn_h) on its first call there: whether its legacy calls, and also
 * its graph API, are there. */
bool rlx_dnn_ready(void);
bool rlx_dnn_graph_ready(void);

cudnnDataType_t dnn_type(rlx_dtype dt);

/* One cuDNN operation graph through the backend API: the execution plan
 * chosen for it and its variant pack, built at prepare time (arena
 * addresses are fixed per thunk); keep[] holds every other descriptor they
 * came from, released with them. */
typedef struct dnn_graph {
    cudnnBackendDescriptor_t plan, pack;
    cudnnBackendDescriptor_t keep[32];
    int n_keep;
    int64_t ws; /* the plan's workspace bytes */
    int plans;  /* plans timed */
    int pick;   /* the chosen plan's place among the configs tried (-1 none) */
    float ms;   /* the chosen plan's time */
} dnn_graph;

/* Building one operation graph: every descriptor made goes into d->keep;
 * the first failing call is recorded (st, where) and the rest are
 * skipped by the && chains of the callers. */
typedef cudnnBackendDescriptor_t bdesc;
struct graph_build {
    dnn_graph *d;
    cudnnStatus_t st; /* the first failure, and where */
    const char *where;
};

bool gb_ok(graph_build *b, cudnnStatus_t st, const char *where);
bool dnn_keep(dnn_graph *g, bdesc d);
bool gb_new(graph_build *b, cudnnBackendDescriptorType_t ty, bdesc *d, const char *what);
bool gb_set(graph_build *b, bdesc d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t ty, int64_t n,
            const void *v, const char *what);
/* A tensor (virtual: an intermediate that never reaches memory). */
bool gb_tensor(graph_build *b, bdesc *d, int64_t uid, cudnnDataType_t ty, int ndim, const int64_t *dims,
               const int64_t *str, bool virt, const void *p);
/* y = mode(x [, bias]) in f32. */
bool gb_pointwise(graph_build *b, bdesc *op, cudnnPointwiseMode_t mode, bdesc x, bdesc bias, bdesc y);
/* Destroys the plan, the pack and every kept descriptor; zeroes g. */
void dnn_release_graph(dnn_graph *g);
/* Engine configs for op graph `og` from the heuristics (mode A, else B,
 * else the fallback list); the first max_plans that pass the numerical
 * notes (and, unless allow_rtc, need no compiling at finalize), finalize
 * and fit the scratch are each timed on the real buffers (uids[i] ->
 * ptrs[i]), the fastest kept in g with its variant pack (g->pick its place
 * among the configs that passed the notes; only >= 0: that one config
 * alone).  Returns its time (1e30 when none ran). */
float dnn_pick_plan(graph_build *b, bdesc og, void *const *ptrs, const int64_t *uids, int nptr, void *scratch,
                    size_t scratch_bytes, bool allow_rtc, int max_plans, int only, int reps);
#endif

#endif
