// split_chains.cu - does the mlp forward (256 x 1024 -> 4096 -> 4096 -> 1024,
// f16, bias + GELU on the first two GEMMs) finish sooner when its batch is
// cut into C row blocks that run as C independent chains on C streams of one
// CUDA graph?  The kernels of one chain then fill the ramps and tails of the
// other's.  Each GEMM is cuBLASLt's (GELU fused as its epilogue, a stand-in
// for the backend's fused GEMM + GELU); its algorithm is the fastest, timed
// alone, of the heuristic's first eight, asked for with the SM count the
// chain can expect (0 = the whole card).
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 bench/gpu/split_chains.cu -lcublasLt -o split_chains
//   ./split_chains [ROUNDS]
//
// Prints, per configuration, the median host time of a launch + synchronise
// (as rlx_session_run does) over ROUNDS x 200 runs, configurations
// alternating round by round, and the device time between two events.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            printf("cuda: %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static cublasLtHandle_t lt;
static const size_t WS = 32 << 20;
static const int MAXC = 4;

__global__ void fill(half *p, size_t n, unsigned seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)(i * 2654435761u) ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995;
        h ^= h >> 15;
        p[i] = __float2half(((h & 0xffff) / 65536.0f - 0.5f) * scale);
    }
}

static double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct Gemm {
    int M, N, K;
    const half *X, *W, *bias;
    half *C;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lw, lx, lc;
    cublasLtMatmulAlgo_t algo;
    size_t wsb;
    void *ws;
};

static bool launch(const Gemm &g, cudaStream_t s)
{
    float one = 1, zero = 0;
    return cublasLtMatmul(lt, g.op, &one, g.W, g.lw, g.X, g.lx, &zero, g.C, g.lc, g.C, g.lc, &g.algo, g.ws, g.wsb, s) ==
           CUBLAS_STATUS_SUCCESS;
}

/* Device us of one launch: a graph of 10, median of 5 replays. */
static float alone_us(const Gemm &g, cudaStream_t s)
{
    if (!launch(g, s) || cudaStreamSynchronize(s) != cudaSuccess) {
        cudaGetLastError();
        return 1e30f;
    }
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < 10; r++)
        launch(g, s);
    if (cudaStreamEndCapture(s, &gr) != cudaSuccess || cudaGraphInstantiate(&ex, gr, 0) != cudaSuccess) {
        cudaGetLastError();
        return 1e30f;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> v;
    cudaGraphLaunch(ex, s);
    for (int i = 0; i < 5; i++) {
        float t;
        cudaEventRecord(a, s);
        cudaGraphLaunch(ex, s);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t, a, b);
        v.push_back(t * 100.0f);
    }
    std::sort(v.begin(), v.end());
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(gr);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return v[2];
}

/* Sets g's descriptors and picks its algorithm. */
static void prepare(Gemm &g, bool gelu, int sm_target, void *ws, cudaStream_t s)
{
    cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtEpilogue_t epi = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias);
    if (sm_target)
        cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target);
    /* column-major view of the row-major product: C^T[N, M] = W^T[N, K] X^T[K, M] */
    cublasLtMatrixLayoutCreate(&g.lw, CUDA_R_16F, g.N, g.K, g.N);
    cublasLtMatrixLayoutCreate(&g.lx, CUDA_R_16F, g.K, g.M, g.K);
    cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16F, g.N, g.M, g.N);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t wsb = WS;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t hr[8];
    int nh = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.lw, g.lx, g.lc, g.lc, pref, 8, hr, &nh);
    g.ws = ws;
    float best = 1e30f;
    int bi = -1;
    for (int i = 0; i < nh; i++) {
        g.algo = hr[i].algo;
        g.wsb = hr[i].workspaceSize;
        float t = alone_us(g, s);
        if (t < best) {
            best = t;
            bi = i;
        }
    }
    if (bi < 0) {
        printf("no algorithm for %dx%dx%d\n", g.M, g.N, g.K);
        exit(1);
    }
    g.algo = hr[bi].algo;
    g.wsb = hr[bi].workspaceSize;
    printf("  %dx%dx%d%s sm_target %d: %.2f us alone\n", g.M, g.N, g.K, gelu ? " +gelu" : "", sm_target, best);
}

struct Config {
    int chains, sm_target;
    cudaGraphExec_t exec;
    std::vector<double> host;
    std::vector<float> dev;
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    const int M = 256, D[4] = {1024, 4096, 4096, 1024};
    cudaStream_t s0, sc[MAXC];
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    for (int c = 0; c < MAXC; c++)
        CK(cudaStreamCreateWithFlags(&sc[c], cudaStreamNonBlocking));
    cublasLtCreate(&lt);
    half *act[4], *w[3], *b[3];
    for (int l = 0; l < 4; l++) {
        CK(cudaMalloc(&act[l], (size_t)M * D[l] * 2));
        fill<<<256, 256>>>(act[l], (size_t)M * D[l], 10 + l, 2.0f);
    }
    for (int l = 0; l < 3; l++) {
        CK(cudaMalloc(&w[l], (size_t)D[l] * D[l + 1] * 2));
        CK(cudaMalloc(&b[l], (size_t)D[l + 1] * 2));
        fill<<<256, 256>>>(w[l], (size_t)D[l] * D[l + 1], 20 + l, 0.05f);
        fill<<<4, 256>>>(b[l], D[l + 1], 30 + l, 0.1f);
    }
    void *ws[MAXC];
    for (int c = 0; c < MAXC; c++)
        CK(cudaMalloc(&ws[c], WS));
    CK(cudaDeviceSynchronize());

    const int shapes[][2] = {{1, 0}, {2, 0}, {2, 66}, {4, 0}, {4, 33}};
    std::vector<Config> cfgs;
    for (auto &sh : shapes) {
        Config cf;
        cf.chains = sh[0];
        cf.sm_target = sh[1];
        printf("chains %d, sm_target %d\n", cf.chains, cf.sm_target);
        int rows = M / cf.chains;
        std::vector<Gemm> gs;
        for (int c = 0; c < cf.chains; c++)
            for (int l = 0; l < 3; l++) {
                Gemm g;
                g.M = rows;
                g.K = D[l];
                g.N = D[l + 1];
                g.X = act[l] + (size_t)c * rows * D[l];
                g.C = act[l + 1] + (size_t)c * rows * D[l + 1];
                g.W = w[l];
                g.bias = b[l];
                if (c == 0) {
                    prepare(g, l < 2, cf.sm_target, ws[c], s0);
                } else { /* the same shape: the same algorithm */
                    Gemm &first = gs[l];
                    g.op = first.op;
                    g.lw = first.lw;
                    g.lx = first.lx;
                    g.lc = first.lc;
                    g.algo = first.algo;
                    g.wsb = first.wsb;
                    g.ws = ws[c];
                }
                gs.push_back(g);
            }
        /* the bias pointer lives in the descriptor: chains share it (same bias) */
        cudaGraph_t gr;
        cudaEvent_t fork, join[MAXC];
        CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        for (int c = 0; c < MAXC; c++)
            CK(cudaEventCreateWithFlags(&join[c], cudaEventDisableTiming));
        CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
        if (cf.chains == 1) {
            for (int l = 0; l < 3; l++)
                launch(gs[l], s0);
        } else {
            CK(cudaEventRecord(fork, s0));
            for (int c = 0; c < cf.chains; c++) {
                CK(cudaStreamWaitEvent(sc[c], fork, 0));
                for (int l = 0; l < 3; l++)
                    if (!launch(gs[c * 3 + l], sc[c]))
                        printf("launch failed\n");
                CK(cudaEventRecord(join[c], sc[c]));
                CK(cudaStreamWaitEvent(s0, join[c], 0));
            }
        }
        CK(cudaStreamEndCapture(s0, &gr));
        CK(cudaGraphInstantiate(&cf.exec, gr, 0));
        CK(cudaGraphUpload(cf.exec, s0));
        cfgs.push_back(cf);
    }

    /* the outputs of every configuration agree (same algorithms per row
     * block do not hold across configurations, so within f16 rounding) */
    std::vector<half> ref((size_t)M * D[3]), out((size_t)M * D[3]);
    for (size_t i = 0; i < cfgs.size(); i++) {
        CK(cudaGraphLaunch(cfgs[i].exec, s0));
        CK(cudaStreamSynchronize(s0));
        CK(cudaMemcpy(i ? out.data() : ref.data(), act[3], out.size() * 2, cudaMemcpyDeviceToHost));
        if (i) {
            double md = 0, rms = 0;
            for (size_t k = 0; k < out.size(); k++) {
                double r = __half2float(ref[k]), d = __half2float(out[k]) - r;
                md = std::max(md, d < 0 ? -d : d);
                rms += r * r;
            }
            printf("config %zu: max |diff| %.3g, rms of output %.3g\n", i, md, sqrt(rms / out.size()));
        }
    }

    cudaEvent_t a, e;
    cudaEventCreate(&a);
    cudaEventCreate(&e);
    for (int r = 0; r < rounds; r++)
        for (auto &cf : cfgs) {
            for (int i = 0; i < 20; i++)
                cudaGraphLaunch(cf.exec, s0);
            CK(cudaStreamSynchronize(s0));
            for (int i = 0; i < 200; i++) {
                double t0 = now_us();
                cudaGraphLaunch(cf.exec, s0);
                cudaStreamSynchronize(s0);
                cf.host.push_back(now_us() - t0);
            }
            for (int i = 0; i < 20; i++) {
                float t;
                cudaEventRecord(a, s0);
                cudaGraphLaunch(cf.exec, s0);
                cudaEventRecord(e, s0);
                cudaEventSynchronize(e);
                cudaEventElapsedTime(&t, a, e);
                cf.dev.push_back(t * 1000.0f);
            }
        }
    CK(cudaGetLastError());
    printf("\nchains | sm_target | host median us | host p10 us | device median us\n");
    for (auto &cf : cfgs) {
        std::sort(cf.host.begin(), cf.host.end());
        std::sort(cf.dev.begin(), cf.dev.end());
        printf("%6d | %9d | %14.2f | %11.2f | %16.2f\n", cf.chains, cf.sm_target, cf.host[cf.host.size() / 2],
               cf.host[cf.host.size() / 10], cf.dev[cf.dev.size() / 2]);
    }
    return 0;
}
