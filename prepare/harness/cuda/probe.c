/* Probe (issue 11): launch a Triton cubin from plain C through the CUDA
 * driver API, loaded at run time, with no CUDA header or library at build
 * time. It reads DIR/add.launch (kernel, grid, block, shared memory and
 * the parameter list, written by routes/triton/probe_compile.py) and
 * DIR/add.cubin, runs the kernel on x = i, y = 2i with the output
 * poisoned, checks out = 3i element by element, and times launches with
 * CUDA events. This is the launch path the CUDA timer will use.
 *
 * build: cc -O2 -o probe probe.c -ldl      run: ./probe DIR
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(CUdevice *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuGetErrorString)(CUresult, const char **);
static CUresult (*cuEventCreate)(CUevent *, unsigned);
static CUresult (*cuEventRecord)(CUevent, CUstream);
static CUresult (*cuEventSynchronize)(CUevent);
static CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*cuFuncSetAttribute)(CUfunction, int, int);

static void *sym(void *lib, const char *a, const char *b) {
    void *p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    if (!p) { fprintf(stderr, "libcuda: no %s\n", a); exit(2); }
    return p;
}

static void check(CUresult r, const char *what) {
    if (r == 0) return;
    const char *s = "unknown";
    if (cuGetErrorString) cuGetErrorString(r, &s);
    fprintf(stderr, "%s: CUDA error %d: %s\n", what, r, s);
    exit(1);
}

#define MAXP 32

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: probe DIR\n"); return 2; }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror()); return 2; }
    cuInit = sym(lib, "cuInit", 0);
    cuDeviceGet = sym(lib, "cuDeviceGet", 0);
    cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain", 0);
    cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent", 0);
    cuModuleLoadData = sym(lib, "cuModuleLoadData", 0);
    cuModuleGetFunction = sym(lib, "cuModuleGetFunction", 0);
    cuMemAlloc = sym(lib, "cuMemAlloc_v2", 0);
    cuMemcpyHtoD = sym(lib, "cuMemcpyHtoD_v2", 0);
    cuMemcpyDtoH = sym(lib, "cuMemcpyDtoH_v2", 0);
    cuLaunchKernel = sym(lib, "cuLaunchKernel", 0);
    cuCtxSynchronize = sym(lib, "cuCtxSynchronize", 0);
    cuGetErrorString = sym(lib, "cuGetErrorString", 0);
    cuEventCreate = sym(lib, "cuEventCreate", 0);
    cuEventRecord = sym(lib, "cuEventRecord", 0);
    cuEventSynchronize = sym(lib, "cuEventSynchronize", 0);
    cuEventElapsedTime = sym(lib, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    cuFuncSetAttribute = sym(lib, "cuFuncSetAttribute", 0);

    char path[4096], line[512], kname[256] = "";
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
    long long n = 0;
    int np = 0;
    char kind[MAXP][16], arg[MAXP][64];
    snprintf(path, sizeof path, "%s/add.launch", argv[1]);
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); return 2; }
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "kernel %255s", kname) == 1) continue;
        if (sscanf(line, "grid %u %u %u", &grid[0], &grid[1], &grid[2]) == 3) continue;
        if (sscanf(line, "block %u %u %u", &block[0], &block[1], &block[2]) == 3) continue;
        if (sscanf(line, "shared %u", &shared) == 1) continue;
        if (sscanf(line, "n %lld", &n) == 1) continue;
        if (np < MAXP && sscanf(line, "param %15s %63s", kind[np], arg[np]) == 2) { np++; continue; }
        fprintf(stderr, "%s: cannot read %s", path, line);
        return 2;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/add.cubin", argv[1]);
    f = fopen(path, "rb");
    if (!f) { perror(path); return 2; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *cubin = malloc(sz);
    if (fread(cubin, 1, sz, f) != (size_t)sz) { perror(path); return 2; }
    fclose(f);

    check(cuInit(0), "cuInit");
    CUdevice dev;
    CUcontext ctx;
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUmodule mod;
    CUfunction fn;
    check(cuModuleLoadData(&mod, cubin), "cuModuleLoadData");
    check(cuModuleGetFunction(&fn, mod, kname), "cuModuleGetFunction");
    if (shared > 48 * 1024) check(cuFuncSetAttribute(fn, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, shared), "cuFuncSetAttribute");

    size_t bytes = (size_t)n * sizeof(float);
    float *hx = malloc(bytes), *hy = malloc(bytes), *ho = malloc(bytes);
    for (long long i = 0; i < n; i++) { hx[i] = (float)i; hy[i] = 2.0f * (float)i; ho[i] = NAN; }
    CUdeviceptr dx, dy, dout;
    check(cuMemAlloc(&dx, bytes), "cuMemAlloc x");
    check(cuMemAlloc(&dy, bytes), "cuMemAlloc y");
    check(cuMemAlloc(&dout, bytes), "cuMemAlloc out");
    check(cuMemcpyHtoD(dx, hx, bytes), "copy x");
    check(cuMemcpyHtoD(dy, hy, bytes), "copy y");
    check(cuMemcpyHtoD(dout, ho, bytes), "poison out");

    /* One storage slot per parameter; cuLaunchKernel takes their
     * addresses in the PTX entry's order. */
    unsigned long long slot[MAXP];
    void *params[MAXP];
    for (int i = 0; i < np; i++) {
        if (!strcmp(kind[i], "ptr")) {
            slot[i] = !strcmp(arg[i], "x") ? dx : !strcmp(arg[i], "y") ? dy : dout;
        } else if (!strcmp(kind[i], "i32")) {
            int32_t v = (int32_t)atoll(arg[i]);
            memcpy(&slot[i], &v, sizeof v);
        } else if (!strcmp(kind[i], "scratch")) {
            slot[i] = 0; /* Triton's global and profile scratch: none needed */
        } else {
            fprintf(stderr, "param %d: kind %s unknown\n", i, kind[i]);
            return 2;
        }
        params[i] = &slot[i];
    }
    check(cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, 0, params, 0), "launch");
    check(cuCtxSynchronize(), "sync");
    check(cuMemcpyDtoH(ho, dout, bytes), "copy out");
    long long bad = 0, first = -1;
    for (long long i = 0; i < n; i++)
        if (ho[i] != 3.0f * (float)i) { if (first < 0) first = i; bad++; }
    printf("kernel %s: %d params, grid %u, block %u, shared %u: %lld of %lld outputs wrong (first %lld)\n", kname, np, grid[0], block[0], shared, bad, n, first);

    CUevent a, b;
    check(cuEventCreate(&a, 0), "event");
    check(cuEventCreate(&b, 0), "event");
    for (int w = 0; w < 10; w++)
        check(cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, 0, params, 0), "launch");
    int reps = 200;
    check(cuEventRecord(a, 0), "record");
    for (int r = 0; r < reps; r++)
        check(cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, 0, params, 0), "launch");
    check(cuEventRecord(b, 0), "record");
    check(cuEventSynchronize(b), "event sync");
    float ms = 0;
    check(cuEventElapsedTime(&ms, a, b), "elapsed");
    double us = 1000.0 * ms / reps;
    printf("%d launches: %.3f us each, %.1f GB/s (3 x %lld x 4 bytes)\n", reps, us, 3.0 * bytes / (us * 1e3), n);
    return bad ? 1 : 0;
}
