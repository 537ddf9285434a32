// launch_floor.cu - the host's time per run (launch + synchronise) of small
// CUDA graphs: empty kernels, one-element-per-thread exp kernels (with and
// without programmatic dependent launch), a kernel shaped like RLX's
// vectorised unary kernel (one block, 16-byte vectors) with the op
// dispatched per element, fixed at compile time, or dispatched once before
// the loop, and an RLX session running the same chain of exp nodes.
// Medians of 3000 runs.
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 -Iinclude bench/gpu/launch_floor.cu
//        -LBUILD -lrlx -Xlinker -rpath -Xlinker BUILD -o launch_floor      (one line)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
#include <algorithm>
#include <vector>
extern "C" {
#include "rlx.h"
}

static double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__device__ __forceinline__ void wait_previous(bool wait)
{
    if (wait) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
}

__global__ void empty_k() {}

__global__ void exp_k(__half *y, const __half *x, int n, bool wait)
{
    wait_previous(wait);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __float2half(expf(__half2float(x[i])));
}

__device__ __forceinline__ float unary(int op, float x)
{
    switch (op) {
    case 1: return -x;
    case 2: return fabsf(x);
    case 3: return expf(x);
    case 4: return logf(x);
    case 5: return sqrtf(x);
    case 6: return tanhf(x);
    case 7: return erff(x);
    case 8: return sinf(x);
    case 9: return cosf(x);
    default: return __int_as_float(0x7fc00000);
    }
}

__global__ void vec_k(int op, const uint4 *x, uint4 *y, int64_t nv)
{
    wait_previous(true);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        uint4 v = x[i];
        __half *e = (__half *)&v;
#pragma unroll
        for (int k = 0; k < 8; k++)
            e[k] = __float2half(unary(op, __half2float(e[k])));
        y[i] = v;
    }
}

/* The same loop with the op fixed at compile time ... */
template <int OP> __device__ __forceinline__ void vec_body(const uint4 *x, uint4 *y, int64_t nv)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        uint4 v = x[i];
        __half *e = (__half *)&v;
#pragma unroll
        for (int k = 0; k < 8; k++)
            e[k] = __float2half(unary(OP, __half2float(e[k])));
        y[i] = v;
    }
}

template <int OP> __global__ void vec_t_k(const uint4 *x, uint4 *y, int64_t nv)
{
    wait_previous(true);
    vec_body<OP>(x, y, nv);
}

/* ... and chosen by one switch before the loop instead of one per element */
__global__ void vec_hoist_k(int op, const uint4 *x, uint4 *y, int64_t nv)
{
    wait_previous(true);
    switch (op) {
    case 1: vec_body<1>(x, y, nv); break;
    case 2: vec_body<2>(x, y, nv); break;
    case 3: vec_body<3>(x, y, nv); break;
    case 4: vec_body<4>(x, y, nv); break;
    case 5: vec_body<5>(x, y, nv); break;
    case 6: vec_body<6>(x, y, nv); break;
    case 7: vec_body<7>(x, y, nv); break;
    case 8: vec_body<8>(x, y, nv); break;
    case 9: vec_body<9>(x, y, nv); break;
    }
}

template <class F> static double median_us(F f, int n = 3000)
{
    for (int i = 0; i < 200; i++)
        f();
    std::vector<double> v;
    for (int i = 0; i < n; i++) {
        double a = now_us();
        f();
        v.push_back(now_us() - a);
    }
    std::sort(v.begin(), v.end());
    return v[n / 2];
}

enum { EMPTY, EXP, EXP_WAIT, VEC, VEC_T, VEC_HOIST };

static double raw_graph(int k, int kind, int pdl)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    __half *a, *b;
    cudaMalloc(&a, 4096);
    cudaMalloc(&b, 4096);
    cudaMemset(a, 0, 4096);
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < k; i++) {
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at.val.programmaticStreamSerializationAllowed = pdl;
        cudaLaunchConfig_t c = {};
        c.attrs = &at;
        c.numAttrs = 1;
        c.stream = s;
        __half *in = (i & 1) ? b : a, *out = (i & 1) ? a : b;
        if (kind == EMPTY) {
            c.gridDim = 1;
            c.blockDim = 32;
            cudaLaunchKernelEx(&c, empty_k);
        } else if (kind == VEC) {
            c.gridDim = 1;
            c.blockDim = 256;
            cudaLaunchKernelEx(&c, vec_k, 3, (const uint4 *)in, (uint4 *)out, (int64_t)128);
        } else if (kind == VEC_T || kind == VEC_HOIST) {
            c.gridDim = 1;
            c.blockDim = 256;
            if (kind == VEC_T)
                cudaLaunchKernelEx(&c, vec_t_k<3>, (const uint4 *)in, (uint4 *)out, (int64_t)128);
            else
                cudaLaunchKernelEx(&c, vec_hoist_k, 3, (const uint4 *)in, (uint4 *)out, (int64_t)128);
        } else {
            c.gridDim = 4;
            c.blockDim = 256;
            cudaLaunchKernelEx(&c, exp_k, out, (const __half *)in, 1024, kind == EXP_WAIT);
        }
    }
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&e, g, 0);
    double r = median_us([&] {
        cudaGraphLaunch(e, s);
        cudaStreamSynchronize(s);
    });
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    return r;
}

static double rlx_chain(int k)
{
    rlx_graph *g = rlx_graph_new();
    int64_t d[1] = {1024};
    rlx_node y = rlx_input(g, "x", RLX_F16, 1, d);
    for (int i = 0; i < k; i++)
        y = rlx_exp(g, y);
    rlx_output(g, "y", y);
    rlx_options o;
    rlx_options_init(&o);
    o.device = RLX_DEVICE_CUDA;
    o.no_fusion = 1; /* one kernel per exp */
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK) {
        printf("rlx compile: %s\n", rlx_last_error());
        return -1;
    }
    static unsigned short x[1024];
    rlx_session_set_input(s, "x", x, sizeof x);
    double r = median_us([&] { rlx_session_run(s); });
    rlx_session_free(s);
    rlx_graph_free(g);
    return r;
}

int main()
{
    cudaFree(0);
    printf("kernels | empty | exp | exp, PDL, no wait | exp, PDL + wait | vec+switch, PDL + wait | vec+switch | vec, "
           "op fixed, PDL + wait | vec, switch hoisted, PDL + wait | RLX exp chain (us)\n");
    for (int k : {1, 3, 10})
        printf("%7d | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f\n", k,
               raw_graph(k, EMPTY, 0), raw_graph(k, EXP, 0), raw_graph(k, EXP, 1), raw_graph(k, EXP_WAIT, 1),
               raw_graph(k, VEC, 1), raw_graph(k, VEC, 0), raw_graph(k, VEC_T, 1), raw_graph(k, VEC_HOIST, 1),
               rlx_chain(k));
    return 0;
}
