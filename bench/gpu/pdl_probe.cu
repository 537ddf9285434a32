/* pdl_probe.cu - does a kernel wait for the one before it when the graph
 * edge between them lets it start early (programmatic dependent launch)?
 *
 * A writer kernel lets its dependents launch at once, sleeps 200 us, then
 * writes A = 1.  The kernel after it, behind a programmatic edge, reads A:
 * if it waited (griddepcontrol.wait) it sees the ones, else the zeros A held
 * before.  Checked first on a copy kernel with and without the wait (the
 * probe's own control: exits 1 when it does not tell them apart), then on
 * every cuBLASLt algorithm the heuristic offers for the mlp's GEMMs (C = A B
 * + bias with B = 1: all K when the GEMM waited).  This is why the CUDA
 * backend never lets an edge into a cuBLASLt kernel start early.
 *
 *   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 bench/gpu/pdl_probe.cu -lcublasLt -o pdl_probe && ./pdl_probe */
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <stdio.h>
#include <vector>

__global__ void writer(__half *a, size_t n, unsigned long long ns)
{
    asm volatile("griddepcontrol.launch_dependents;");
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        a[i] = __float2half(1.f);
}

__global__ void copy(const __half *a, __half *c, size_t n, int wait)
{
    if (wait)
        asm volatile("griddepcontrol.wait;" ::: "memory");
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        c[i] = a[i];
}

/* Makes the captured graph's one kernel-to-kernel edge programmatic. */
static bool make_early(cudaGraph_t g)
{
    size_t ne = 0;
    cudaGraphGetEdges(g, NULL, NULL, NULL, &ne);
    std::vector<cudaGraphNode_t> f(ne), t(ne);
    std::vector<cudaGraphEdgeData> d(ne);
    cudaGraphGetEdges(g, f.data(), t.data(), d.data(), &ne);
    int made = 0;
    for (size_t e = 0; e < ne; e++) {
        cudaGraphNodeType a, b;
        cudaGraphNodeGetType(f[e], &a);
        cudaGraphNodeGetType(t[e], &b);
        if (a != cudaGraphNodeTypeKernel || b != cudaGraphNodeTypeKernel)
            continue;
        cudaGraphEdgeData pe = d[e];
        pe.from_port = cudaGraphKernelNodePortProgrammatic;
        pe.type = cudaGraphDependencyTypeProgrammatic;
        made += cudaGraphRemoveDependencies(g, &f[e], &t[e], &d[e], 1) == cudaSuccess &&
                cudaGraphAddDependencies(g, &f[e], &t[e], &pe, 1) == cudaSuccess;
    }
    return made > 0;
}

/* Replays g once; returns how many of the n halves at out equal want. */
static size_t run_count(cudaGraph_t g, cudaStream_t st, const __half *out, size_t n, float want)
{
    cudaGraphExec_t ex;
    if (cudaGraphInstantiate(&ex, g, 0) != cudaSuccess)
        return (size_t)-1;
    cudaGraphLaunch(ex, st);
    cudaStreamSynchronize(st);
    std::vector<__half> h(n);
    cudaMemcpy(h.data(), out, n * 2, cudaMemcpyDeviceToHost);
    cudaGraphExecDestroy(ex);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += __half2float(h[i]) == want;
    return k;
}

int main(void)
{
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
        printf("no CUDA device\n");
        return 1;
    }
    size_t n = 1 << 20;
    __half *a, *c;
    cudaMalloc(&a, n * 2);
    cudaMalloc(&c, n * 2);
    size_t seen[2];
    for (int w = 0; w < 2; w++) {
        cudaMemset(a, 0, n * 2);
        cudaMemset(c, 0xFF, n * 2);
        cudaDeviceSynchronize();
        cudaGraph_t g;
        cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        writer<<<1, 256, 0, st>>>(a, n, 200000ull);
        copy<<<132, 256, 0, st>>>(a, c, n, w);
        cudaStreamEndCapture(st, &g);
        bool early = make_early(g);
        seen[w] = run_count(g, st, c, n, 1.f);
        cudaGraphDestroy(g);
        printf("control: copy kernel %s the wait, edge starts early %d: %zu of %zu read the writer's value\n",
               w ? "with" : "without", early, seen[w], n);
    }
    cudaFree(a);
    cudaFree(c);
    if (seen[0] != 0 || seen[1] != n) {
        printf("the control does not tell a waiting kernel from one that does not wait\n");
        return 1;
    }

    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    size_t wsb = 32 << 20;
    void *ws;
    cudaMalloc(&ws, wsb);
    const int shapes[][3] = {{256, 4096, 1024}, {256, 4096, 4096}, {256, 1024, 4096}};
    for (auto &sh : shapes) {
        int M = sh[0], N = sh[1], K = sh[2];
        __half *A, *B, *C, *bias;
        cudaMalloc(&A, (size_t)M * K * 2);
        cudaMalloc(&B, (size_t)K * N * 2);
        cudaMalloc(&C, (size_t)M * N * 2);
        cudaMalloc(&bias, N * 2);
        std::vector<__half> ones((size_t)K * N, __float2half(1.f));
        cudaMemcpy(B, ones.data(), ones.size() * 2, cudaMemcpyHostToDevice);
        cudaMemset(bias, 0, N * 2);
        /* row-major C[M,N] = A[M,K] B[K,N] is column-major C^T = B^T A^T */
        cublasLtMatmulDesc_t op;
        cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType bt = CUDA_R_16F;
        void *bp = bias;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, N, K, N);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, K, M, K);
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, N, M, N);
        cublasLtMatmulPreference_t pr;
        cublasLtMatmulPreferenceCreate(&pr);
        cublasLtMatmulPreferenceSetAttribute(pr, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
        cublasLtMatmulHeuristicResult_t res[16];
        int found = 0, waited = 0, early = 0;
        cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pr, 16, res, &found);
        for (int i = 0; i < found; i++) {
            float alpha = 1, beta = 0;
            cudaMemset(A, 0, (size_t)M * K * 2);
            cudaDeviceSynchronize();
            cudaGraph_t g;
            cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
            writer<<<1, 256, 0, st>>>(A, (size_t)M * K, 200000ull);
            cublasStatus_t cs =
                cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &res[i].algo, ws, wsb, st);
            cudaStreamEndCapture(st, &g);
            if (cs == CUBLAS_STATUS_SUCCESS && make_early(g)) {
                bool ok = run_count(g, st, C, (size_t)M * N, (float)K) == (size_t)M * N;
                waited += ok;
                early += !ok;
            }
            cudaGraphDestroy(g);
        }
        printf("cuBLASLt %dx%dx%d f16 + bias: %d algorithms waited, %d read A before the writer finished\n", M, N, K,
               waited, early);
        cudaFree(A);
        cudaFree(B);
        cudaFree(C);
        cudaFree(bias);
    }
    return 0;
}
