// sync_floor.cu - the host's time per run (launch + wait) of a small CUDA
// graph, waited for in different ways: cudaStreamSynchronize, a loop of
// cudaStreamQuery, or a spin on a flag in mapped pinned memory that the
// graph's last node writes (a one-thread kernel, or a stream write-value
// node).  Graphs: one empty kernel, and three kernels of 10 us each.
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 bench/gpu/sync_floor.cu -lcuda -o sync_floor
//   ./sync_floor [spin|yield|block|auto]
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            printf("cuda: %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void busy(unsigned long long ns)
{
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
}

__global__ void post(volatile unsigned *flag, const unsigned *value)
{
    *flag = *value;
    __threadfence_system();
}

enum Wait { SYNC, QUERY, FLAG_KERNEL, FLAG_WRITE };
static const char *wait_name[] = {"cudaStreamSynchronize", "cudaStreamQuery loop", "flag by kernel",
                                  "flag by write-value"};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "auto";
    unsigned flags = !strcmp(mode, "spin")    ? cudaDeviceScheduleSpin
                     : !strcmp(mode, "yield") ? cudaDeviceScheduleYield
                     : !strcmp(mode, "block") ? cudaDeviceScheduleBlockingSync
                                              : cudaDeviceScheduleAuto;
    CK(cudaSetDeviceFlags(flags | cudaDeviceMapHost));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *flag, *value, *dflag, *dvalue;
    CK(cudaHostAlloc(&flag, 64, cudaHostAllocMapped));
    CK(cudaHostAlloc(&value, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&dflag, flag, 0));
    CK(cudaHostGetDevicePointer(&dvalue, value, 0));
    *flag = 0;
    *value = 0;
    printf("scheduling: %s\n", mode);
    printf("kernels | wait | median us | p10 us\n");
    for (int work = 0; work < 2; work++) {
        int nk = work ? 3 : 1;
        unsigned long long ns = work ? 10000 : 0;
        for (int w = SYNC; w <= FLAG_WRITE; w++) {
            cudaGraph_t g;
            cudaGraphExec_t ex;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            for (int k = 0; k < nk; k++)
                busy<<<1, 32, 0, s>>>(ns);
            if (w == FLAG_KERNEL)
                post<<<1, 1, 0, s>>>(dflag, dvalue);
            CK(cudaStreamEndCapture(s, &g));
            if (w == FLAG_WRITE) {
                /* the value is fixed at capture, so this variant toggles by
                 * zeroing the flag on the host before each launch */
                cudaGraphNode_t last = NULL, *deps = NULL;
                size_t n = 0;
                cudaGraphGetNodes(g, NULL, &n);
                std::vector<cudaGraphNode_t> nodes(n);
                cudaGraphGetNodes(g, nodes.data(), &n);
                last = nodes[n - 1];
                deps = &last;
                CUstreamBatchMemOpParams op;
                memset(&op, 0, sizeof op);
                op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
                op.writeValue.address = (CUdeviceptr)dflag;
                op.writeValue.value = 1;
                op.writeValue.flags = 0;
                CUDA_BATCH_MEM_OP_NODE_PARAMS p;
                memset(&p, 0, sizeof p);
                CUcontext ctx;
                cuCtxGetCurrent(&ctx);
                p.ctx = ctx;
                p.count = 1;
                p.paramArray = &op;
                p.flags = 0;
                CUgraphNode node;
                if (cuGraphAddBatchMemOpNode(&node, (CUgraph)g, (const CUgraphNode *)deps, 1, &p) != CUDA_SUCCESS) {
                    printf("%d | %s | not supported\n", nk, wait_name[w]);
                    continue;
                }
            }
            CK(cudaGraphInstantiate(&ex, g, 0));
            CK(cudaGraphUpload(ex, s));
            std::vector<double> t;
            for (int r = 0; r < 3200; r++) {
                unsigned want = (unsigned)r + 1;
                if (w == FLAG_WRITE)
                    *(volatile unsigned *)flag = 0, want = 1;
                else
                    *(volatile unsigned *)value = want;
                double t0 = now_us();
                CK(cudaGraphLaunch(ex, s));
                if (w == SYNC) {
                    CK(cudaStreamSynchronize(s));
                } else if (w == QUERY) {
                    cudaError_t e;
                    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
                    }
                    CK(e);
                } else {
                    while (*(volatile unsigned *)flag != want) {
                    }
                }
                double dt = now_us() - t0;
                if (w >= FLAG_KERNEL)
                    CK(cudaStreamSynchronize(s)); /* not timed: keeps runs apart */
                if (r >= 200)
                    t.push_back(dt);
            }
            std::sort(t.begin(), t.end());
            printf("%d | %s | %.2f | %.2f\n", nk, wait_name[w], t[t.size() / 2], t[t.size() / 10]);
            cudaGraphExecDestroy(ex);
            cudaGraphDestroy(g);
        }
    }
    return 0;
}
