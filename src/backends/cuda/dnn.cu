/* dnn.cu - cuDNN, loaded at run time (dlopen: no link dependency), and the
 * pieces of its graph (backend) API that the convolution and matmul paths
 * share: descriptor building with the first failure recorded, and the
 * timed choice of an execution plan.  See cuda_dnn.h. */
#include "backends/cuda/cuda_dnn.h"

#ifdef RLX_CUDNN
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

rlx_dnn_api rlx_dnn;

static int dnn_ok, dnn_graph_ok;
static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;

static void dnn_load(void)
{
    if (rlx_cu_cfg.cuda_no_cudnn) /* loaded once per process: the first compile that asks decides */
        return;
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    bool ok = true;
#define DNN_LOAD(name) ok = ok && (*(void **)&rlx_dnn.name = dlsym(lib, #name)) != NULL
    DNN_LOAD(cudnnCreate);
    DNN_LOAD(cudnnSetStream);
    DNN_LOAD(cudnnCreateTensorDescriptor);
    DNN_LOAD(cudnnSetTensor4dDescriptor);
    DNN_LOAD(cudnnDestroyTensorDescriptor);
    DNN_LOAD(cudnnCreateFilterDescriptor);
    DNN_LOAD(cudnnSetFilter4dDescriptor);
    DNN_LOAD(cudnnDestroyFilterDescriptor);
    DNN_LOAD(cudnnCreateConvolutionDescriptor);
    DNN_LOAD(cudnnSetConvolution2dDescriptor);
    DNN_LOAD(cudnnSetConvolutionGroupCount);
    DNN_LOAD(cudnnSetConvolutionMathType);
    DNN_LOAD(cudnnDestroyConvolutionDescriptor);
    DNN_LOAD(cudnnFindConvolutionForwardAlgorithmEx);
    DNN_LOAD(cudnnConvolutionForward);
    DNN_LOAD(cudnnConvolutionBiasActivationForward);
    DNN_LOAD(cudnnCreateActivationDescriptor);
    DNN_LOAD(cudnnSetActivationDescriptor);
    DNN_LOAD(cudnnDestroyActivationDescriptor);
    bool legacy = ok;
    DNN_LOAD(cudnnBackendCreateDescriptor);
    DNN_LOAD(cudnnBackendDestroyDescriptor);
    DNN_LOAD(cudnnBackendSetAttribute);
    DNN_LOAD(cudnnBackendGetAttribute);
    DNN_LOAD(cudnnBackendFinalize);
    DNN_LOAD(cudnnBackendExecute);
#undef DNN_LOAD
    if (!legacy)
        return;
    dnn_ok = 1;
    dnn_graph_ok = ok;
}

/* The library, then the current device's handle on its stream. */
static bool dnn_device_ready(void)
{
    pthread_once(&dnn_once, dnn_load);
    if (!dnn_ok)
        return false;
    cu_device *d = rlx_cu_dev;
    pthread_mutex_lock(&d->handles_lock);
    if (!d->dnn) {
        cudnnHandle_t h = NULL;
        if (rlx_dnn.cudnnCreate(&h) == CUDNN_STATUS_SUCCESS) {
            rlx_dnn.cudnnSetStream(h, d->stream);
            d->dnn = h;
        }
    }
    pthread_mutex_unlock(&d->handles_lock);
    return d->dnn != NULL;
}

bool rlx_dnn_ready(void) { return dnn_device_ready(); }

bool rlx_dnn_graph_ready(void) { return dnn_device_ready() && dnn_graph_ok; }

cudnnDataType_t dnn_type(rlx_dtype dt)
{
    return dt == RLX_F16 ? CUDNN_DATA_HALF : dt == RLX_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

bool gb_ok(graph_build *b, cudnnStatus_t st, const char *where)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return true;
    if (!b->where) {
        b->st = st;
        b->where = where;
    }
    return false;
}

/* Keeps a descriptor until the graph is released; false when full. */
bool dnn_keep(dnn_graph *g, bdesc d)
{
    if (g->n_keep >= (int)(sizeof g->keep / sizeof g->keep[0]))
        return false;
    g->keep[g->n_keep++] = d;
    return true;
}

/* A descriptor kept until the graph is released. */
bool gb_new(graph_build *b, cudnnBackendDescriptorType_t ty, bdesc *d, const char *what)
{
    *d = NULL;
    if (b->d->n_keep >= (int)(sizeof b->d->keep / sizeof b->d->keep[0]))
        return gb_ok(b, CUDNN_STATUS_NOT_SUPPORTED, "descriptor table full");
    if (!gb_ok(b, rlx_dnn.cudnnBackendCreateDescriptor(ty, d), what)) {
        *d = NULL;
        return false;
    }
    dnn_keep(b->d, *d);
    return true;
}

bool gb_set(graph_build *b, bdesc d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t ty, int64_t n,
            const void *v, const char *what)
{
    return gb_ok(b, rlx_dnn.cudnnBackendSetAttribute(d, a, ty, n, v), what);
}

bool gb_tensor(graph_build *b, bdesc *d, int64_t uid, cudnnDataType_t ty, int ndim, const int64_t *dims,
               const int64_t *str, bool virt, const void *p)
{
    int64_t al = virt ? 16 : cu_ptr_align(p);
    return gb_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, d, "tensor create") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ty, "tensor type") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, ndim, dims, "tensor dims") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, ndim, str, "tensor strides") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al, "tensor alignment") &&
           gb_set(b, *d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual") &&
           gb_ok(b, rlx_dnn.cudnnBackendFinalize(*d), "tensor finalize");
}

/* y = mode(x [, bias]) */
bool gb_pointwise(graph_build *b, bdesc *op, cudnnPointwiseMode_t mode, bdesc x, bdesc bias, bdesc y)
{
    bdesc pw;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    double beta = 1.0; /* SiLU: swish with beta 1 */
    return gb_new(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw, "pointwise create") &&
           gb_set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode") &&
           gb_set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision") &&
           (mode != CUDNN_POINTWISE_SWISH_FWD ||
            gb_set(b, pw, CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, 1, &beta, "swish beta")) &&
           gb_ok(b, rlx_dnn.cudnnBackendFinalize(pw), "pointwise finalize") &&
           gb_new(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op, "pointwise op create") &&
           gb_set(b, *op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw,
                  "pointwise op desc") &&
           gb_set(b, *op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pointwise x") &&
           (!bias || gb_set(b, *op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bias,
                            "pointwise b")) &&
           gb_set(b, *op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise y") &&
           gb_ok(b, rlx_dnn.cudnnBackendFinalize(*op), "pointwise op finalize");
}

void dnn_release_graph(dnn_graph *g)
{
    if (g->pack)
        rlx_dnn.cudnnBackendDestroyDescriptor(g->pack);
    if (g->plan)
        rlx_dnn.cudnnBackendDestroyDescriptor(g->plan);
    /* users before what they use: ops before tensors, configs before the graph */
    for (int i = g->n_keep - 1; i >= 0; i--)
        rlx_dnn.cudnnBackendDestroyDescriptor(g->keep[i]);
    memset(g, 0, sizeof *g);
}

static bool launch_plan(void *arg)
{
    bdesc *pp = (bdesc *)arg;
    return rlx_dnn.cudnnBackendExecute(rlx_dnn_h, pp[0], pp[1]) == CUDNN_STATUS_SUCCESS;
}

static bool engine_ok(bdesc cfg, bool allow_rtc)
{
    bdesc eng = NULL;
    if (rlx_dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
        return true;
    int64_t n = 0;
    bool ok = true;
    if (rlx_dnn.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                         &eng) == CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        if (rlx_dnn.cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                             CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
                /* f16 accumulation would miss the f32-accumulating reference */
                if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                    notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
                    ok = false;
        cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
        /* engines compiled at finalize (NVRTC) cost seconds per conv at compile time */
        if (!allow_rtc &&
            rlx_dnn.cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                             CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, bn) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
                if (bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
                    ok = false;
    }
    rlx_dnn.cudnnBackendDestroyDescriptor(eng);
    return ok;
}

/* Engine configs for op graph `og` from the heuristics (mode A, else B,
 * else the fallback list); the first max_plans that pass the numerical
 * notes (and, unless allow_rtc, need no compiling at finalize), finalize
 * and fit the scratch are each timed on the real buffers (uids[i] ->
 * ptrs[i]), the fastest kept in g with its variant pack (g->pick its place
 * among the configs that passed the notes; only >= 0: that one config
 * alone).  Returns its time (1e30 when none ran). */
float dnn_pick_plan(graph_build *b, bdesc og, void *const *ptrs, const int64_t *uids, int nptr, void *scratch,
                    size_t scratch_bytes, bool allow_rtc, int max_plans, int only, int reps)
{
    int idx = -1; /* place of the config among those that pass the notes */
    enum { MAX_CFG = 12 };
    static const cudnnBackendHeurMode_t modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};
    dnn_graph *g = b->d;
    float best = 1e30f;
    int tried = 0;
    g->pick = -1;
    for (int m = 0; m < 3 && !g->plan; m++) {
        bdesc heur = NULL;
        if (rlx_dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS)
            break;
        int64_t cnt = 0;
        bdesc cfgs[MAX_CFG] = {NULL};
        bool hok = gb_set(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og,
                          "heuristics graph") &&
                   gb_set(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], "heuristics mode") &&
                   gb_ok(b, rlx_dnn.cudnnBackendFinalize(heur), "heuristics finalize");
        /* how many configs there are (if cuDNN will not say, ask for MAX_CFG) */
        if (hok && rlx_dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                    0, &cnt, NULL) != CUDNN_STATUS_SUCCESS)
            cnt = MAX_CFG;
        int ncfg = hok ? (int)(cnt < (int64_t)MAX_CFG ? cnt : (int64_t)MAX_CFG) : 0;
        int made = 0;
        for (; made < ncfg; made++)
            if (rlx_dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) !=
                CUDNN_STATUS_SUCCESS)
                break;
        if (made && gb_ok(b,
                          rlx_dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &cnt, cfgs),
                          "heuristics results")) {
            for (int i = 0; i < cnt && i < made && tried < max_plans; i++) {
                if (!engine_ok(cfgs[i], allow_rtc) || (++idx != only && only >= 0))
                    continue;
                bdesc plan = NULL, pack = NULL;
                int64_t ws = 0;
                bool pok = rlx_dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) ==
                               CUDNN_STATUS_SUCCESS &&
                           gb_set(b, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &cfgs[i], "plan config");
                if (pok)
                    rlx_dnn.cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                                     &rlx_dnn_h);
                int64_t got = 0;
                void *wsp = scratch;
                pok = pok && gb_ok(b, rlx_dnn.cudnnBackendFinalize(plan), "plan finalize") &&
                      gb_ok(b,
                            rlx_dnn.cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                             CUDNN_TYPE_INT64, 1, &got, &ws),
                            "plan workspace") &&
                      ws >= 0 && (size_t)ws <= scratch_bytes &&
                      rlx_dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack) ==
                          CUDNN_STATUS_SUCCESS &&
                      gb_set(b, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, nptr, uids, "pack ids") &&
                      gb_set(b, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, nptr, ptrs,
                             "pack pointers") &&
                      gb_set(b, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp,
                             "pack workspace") &&
                      gb_ok(b, rlx_dnn.cudnnBackendFinalize(pack), "pack finalize");
                float ms = 1e30f;
                if (pok) {
                    tried++;
                    bdesc pp[2] = {plan, pack};
                    ms = rlx_cu_time_captured(launch_plan, pp, reps);
                }
                if (pok && ms < best) {
                    if (g->pack)
                        rlx_dnn.cudnnBackendDestroyDescriptor(g->pack);
                    if (g->plan)
                        rlx_dnn.cudnnBackendDestroyDescriptor(g->plan);
                    g->plan = plan;
                    g->pack = pack;
                    g->ws = ws;
                    g->pick = idx;
                    best = ms;
                } else {
                    if (pack)
                        rlx_dnn.cudnnBackendDestroyDescriptor(pack);
                    if (plan)
                        rlx_dnn.cudnnBackendDestroyDescriptor(plan);
                }
            }
        }
        /* configs other than the chosen plan's are no longer needed; the
         * chosen plan holds its own reference in cuDNN, but keep every
         * config of the winning round alive with it to be safe */
        for (int i = 0; i < made; i++)
            if (!g->plan || !dnn_keep(g, cfgs[i]))
                rlx_dnn.cudnnBackendDestroyDescriptor(cfgs[i]);
        if (!g->plan || !dnn_keep(g, heur))
            rlx_dnn.cudnnBackendDestroyDescriptor(heur);
    }
    g->plans = tried;
    g->ms = best;
    cudaGetLastError();
    rlx_clear_error();
    return best;
}
#endif
