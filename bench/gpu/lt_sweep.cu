// lt_sweep.cu - how far cuBLASLt's heuristic is from the best configuration
// it can run for one GEMM: row-major C[M, N] = X[M, K] W[K, N] + bias (f16,
// f32 accumulation), laid out the way the CUDA backend calls cuBLASLt.
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 bench/gpu/lt_sweep.cu -lcublasLt -o lt_sweep
//   ./lt_sweep M N K [nn|tn] [quick]
//
// nn (default): W stored [K, N] as the backend keeps a weight; tn: W stored
// transposed, [N, K], so that both operands run along K.  quick: the
// heuristic's candidates only.
//
// Times the heuristic's candidates, then every configuration that
// cublasLtMatmulAlgoCheck accepts among variations of the best one (each
// tile, seven cluster shapes, split-K 1/2/4), and prints the fastest ten.
// "warm": 10 launches captured into a CUDA graph, median of 5 replays (the
// weights stay in L2); "cold": a 120 MB memset before each launch, minus
// the memsets alone (the weights come from memory, as in a forward pass
// whose weights exceed half of L2).
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static cudaStream_t st;
static void *ws;
static const size_t WS = 32 << 20;
static char *flush_buf;
static const size_t FLUSH = 120 << 20;

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

struct Gemm {
    int M, N, K;
    half *X, *W, *C, *bias;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lw, lx, lc;
};

static bool launch(const Gemm &g, const cublasLtMatmulAlgo_t *algo, size_t wsb)
{
    float one = 1, zero = 0;
    return cublasLtMatmul(lt, g.op, &one, g.W, g.lw, g.X, g.lx, &zero, g.C, g.lc, g.C, g.lc, algo, ws, wsb, st) ==
           CUBLAS_STATUS_SUCCESS;
}

/* Median over 5 replays of a graph of 10 launches, in us per launch. */
static float graph_us(const Gemm &g, const cublasLtMatmulAlgo_t *algo, size_t wsb, bool gemm, bool flush)
{
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (int r = 0; r < 10; r++) {
        if (flush)
            cudaMemsetAsync(flush_buf, r, FLUSH, st);
        if (gemm)
            launch(g, algo, wsb);
    }
    if (cudaStreamEndCapture(st, &gr) != cudaSuccess || cudaGraphInstantiate(&ex, gr, 0) != cudaSuccess) {
        cudaGetLastError();
        return 1e30f;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> v;
    cudaGraphLaunch(ex, st);
    for (int i = 0; i < 5; i++) {
        float t;
        cudaEventRecord(a, st);
        cudaGraphLaunch(ex, st);
        cudaEventRecord(b, st);
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

static float warm_us(const Gemm &g, const cublasLtMatmulAlgo_t *algo, size_t wsb)
{
    if (!launch(g, algo, wsb) || cudaStreamSynchronize(st) != cudaSuccess) {
        cudaGetLastError();
        return 1e30f;
    }
    return graph_us(g, algo, wsb, true, false);
}

static float cold_us(const Gemm &g, const cublasLtMatmulAlgo_t *algo, size_t wsb)
{
    return graph_us(g, algo, wsb, true, true) - graph_us(g, algo, wsb, false, true);
}

static int config(const cublasLtMatmulAlgo_t &a, cublasLtMatmulAlgoConfigAttributes_t attr)
{
    int v = 0;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &w);
    return v;
}

struct Found {
    float warm;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
};

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: lt_sweep M N K [nn|tn] [quick]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    Gemm g;
    g.M = atoi(argv[1]);
    g.N = atoi(argv[2]);
    g.K = atoi(argv[3]);
    const bool tn = argc > 4 && !strcmp(argv[4], "tn"), quick = argc > 5 && !strcmp(argv[5], "quick");
    CK(cudaStreamCreate(&st));
    cublasLtCreate(&lt);
    CK(cudaMalloc(&ws, WS));
    CK(cudaMalloc(&flush_buf, FLUSH));
    CK(cudaMalloc(&g.X, (size_t)g.M * g.K * 2));
    CK(cudaMalloc(&g.W, (size_t)g.K * g.N * 2));
    CK(cudaMalloc(&g.C, (size_t)g.M * g.N * 2));
    CK(cudaMalloc(&g.bias, (size_t)g.N * 2));
    fill<<<256, 256>>>(g.X, (size_t)g.M * g.K, 1, 2.0f);
    fill<<<256, 256>>>(g.W, (size_t)g.K * g.N, 2, 0.05f);
    fill<<<4, 256>>>(g.bias, g.N, 3, 0.1f);
    cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias);
    /* column-major view of the row-major product: C^T[N, M] = W^T[N, K] X^T[K, M];
     * tn: W^T is the transpose of a column-major [K, N] with leading dim K */
    if (tn) {
        cublasOperation_t t = CUBLAS_OP_T;
        cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
        cublasLtMatrixLayoutCreate(&g.lw, CUDA_R_16F, g.K, g.N, g.K);
    } else {
        cublasLtMatrixLayoutCreate(&g.lw, CUDA_R_16F, g.N, g.K, g.N);
    }
    cublasLtMatrixLayoutCreate(&g.lx, CUDA_R_16F, g.K, g.M, g.K);
    cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16F, g.N, g.M, g.N);

    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t wsb = WS;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t hr[16];
    int nh = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.lw, g.lx, g.lc, g.lc, pref, 16, hr, &nh);
    int hi = -1;
    float hbest = 1e30f;
    for (int i = 0; i < nh; i++) {
        float t = warm_us(g, &hr[i].algo, hr[i].workspaceSize);
        printf("heuristic %d: algo %d tile %d split-k %d cluster %d: %.2f us warm\n", i,
               config(hr[i].algo, CUBLASLT_ALGO_CONFIG_ID), config(hr[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
               config(hr[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
               config(hr[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), t);
        if (t < hbest) {
            hbest = t;
            hi = i;
        }
    }
    if (hi < 0) {
        printf("no heuristic candidate ran\n");
        return 1;
    }
    printf("%dx%dx%d %s heuristic best: %.2f us warm, %.2f us cold\n", g.M, g.N, g.K, tn ? "tn" : "nn", hbest,
           cold_us(g, &hr[hi].algo, hr[hi].workspaceSize));
    if (quick)
        return 0;

    /* variations of the best candidate: every tile its algorithm offers,
     * cluster shapes, split-K */
    const cublasLtMatmulAlgo_t base = hr[hi].algo;
    size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_TILE_IDS, NULL, 0, &w);
    std::vector<int> tiles(w / sizeof(int));
    if (!tiles.empty())
        cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), w, &w);
    const int clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO,  CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                            CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                            CUBLASLT_CLUSTER_SHAPE_1x4x1};
    std::vector<Found> found;
    for (int tile : tiles)
        for (int cl : clusters)
            for (int sk : {1, 2, 4}) {
                cublasLtMatmulAlgo_t a = base;
                uint32_t red = sk > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red);
                cublasLtMatmulHeuristicResult_t chk;
                if (cublasLtMatmulAlgoCheck(lt, g.op, g.lw, g.lx, g.lc, g.lc, &a, &chk) != CUBLAS_STATUS_SUCCESS ||
                    chk.workspaceSize > WS)
                    continue;
                float t = warm_us(g, &a, chk.workspaceSize);
                if (t < 1e29f)
                    found.push_back({t, a, chk.workspaceSize});
            }
    std::sort(found.begin(), found.end(), [](const Found &x, const Found &y) { return x.warm < y.warm; });
    printf("%zu configurations ran; the fastest:\n", found.size());
    for (size_t i = 0; i < found.size() && i < 10; i++)
        printf("  %.2f us warm, %.2f us cold: tile %d split-k %d cluster %d\n", found[i].warm,
               cold_us(g, &found[i].algo, found[i].ws), config(found[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
               config(found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
               config(found[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
    return 0;
}
