//go:build ignore

/* The line above keeps the go tool from treating this file as cgo source
 * of package fakecuda, which embeds it. */

/*
 * fakecuda.c: libcuda.so.1 and libnvidia-ml.so.1 for tests on a machine
 * without a GPU (CI's), so the CUDA timer's and the telemetry monitor's
 * own code (the command and request channels, descriptor passing, the
 * staged slots' layout, uploads, downloads and checks) runs there. Device
 * memory is host memory: a device pointer is a host address, an
 * allocation of the virtual memory management API is a memory file
 * (memfd), exported and imported as a descriptor, mapped at reserved
 * ranges with mmap and made accessible with mprotect, as the driver makes
 * a mapping accessible only after cuMemSetAccess. A kernel launch runs
 * nothing (but the two split-K kernels of the pipeline test, run on the
 * host: fake_kernel): it sleeps FAKECUDA_LAUNCH_NS ns (0 if unset), so a
 * test can make the monitor's idle probe slow. Every real GPU run is on the H200
 * (docs/results); nothing here says anything of a GPU.
 *
 *     cc -shared -fPIC -o libcuda.so.1 fakecuda.c
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_SUPPORTED = 801 };

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

CUresult cuInit(unsigned flags) { (void)flags; return OK; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? OK : INVALID_VALUE; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = (void *)1; return OK; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuModuleLoadData(void **m, const void *image) { (void)image; *m = (void *)1; return OK; }
/* A function is its name (a kernel a test pipeline names is run on the
 * host: fake_kernel). */
CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
	(void)m;
	*f = strdup(name);
	return *f ? OK : OUT_OF_MEMORY;
}
CUresult cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return OK; }
CUresult cuDeviceGetName(char *name, int n, int d) { (void)d; strncpy(name, "fakecuda", (size_t)n); return OK; }
CUresult cuDeviceGetPCIBusId(char *bus, int n, int d) { (void)d; strncpy(bus, "00000000:00:00.0", (size_t)n); return OK; }
CUresult cuDeviceGetAttribute(int *v, int a, int d)
{
	(void)d;
	*v = a == 38 ? 1 << 20 : 0; /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: 1 MiB */
	return OK;
}

CUresult cuGetErrorString(CUresult rc, const char **s)
{
	*s = rc == INVALID_VALUE ? "fakecuda: invalid value" : rc == OUT_OF_MEMORY ? "fakecuda: out of memory" : "fakecuda: not supported";
	return OK;
}

/* fake_kernel runs, on the host (device memory is host memory), the
 * kernels a pipeline test names; any other name runs nothing. Split-K
 * GEMM of n x n f32 matrices in `parts` slices of k:
 *   fakecuda_gemm_partial(A, B, W, n, parts): W[p] = A[:, slice p]·B[slice p, :]
 *   fakecuda_gemm_reduce(W, C, n, parts):     C = sum over p of W[p]
 * Each launch is appended to $FAKECUDA_LAUNCH_LOG when set: the name and,
 * for these kernels, the buffer W's address. */
static void fake_kernel(const char *name, void **args)
{
	const char *log = getenv("FAKECUDA_LAUNCH_LOG");
	int partial = strcmp(name, "fakecuda_gemm_partial") == 0, reduce = strcmp(name, "fakecuda_gemm_reduce") == 0;
	CUdeviceptr w = 0;
	if (partial || reduce) {
		int n = *(int32_t *)args[partial ? 3 : 2], parts = *(int32_t *)args[partial ? 4 : 3];
		if (partial) {
			const float *a = (const float *)*(CUdeviceptr *)args[0], *b = (const float *)*(CUdeviceptr *)args[1];
			w = *(CUdeviceptr *)args[2];
			float *wp = (float *)w;
			for (int p = 0; p < parts; p++)
				for (int i = 0; i < n; i++)
					for (int j = 0; j < n; j++) {
						float acc = 0;
						for (int k = p * n / parts; k < (p + 1) * n / parts; k++)
							acc += a[i * n + k] * b[k * n + j];
						wp[(p * n + i) * n + j] = acc;
					}
		} else {
			w = *(CUdeviceptr *)args[0];
			const float *wp = (const float *)w;
			float *c = (float *)*(CUdeviceptr *)args[1];
			for (int i = 0; i < n * n; i++) {
				float acc = 0;
				for (int p = 0; p < parts; p++)
					acc += wp[p * n * n + i];
				c[i] = acc;
			}
		}
	}
	if (log && *log) {
		FILE *f = fopen(log, "a");
		if (f) {
			fprintf(f, "%s %llx\n", name, w);
			fclose(f);
		}
	}
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
			void *stream, void **args, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)extra;
	const char *ns = getenv("FAKECUDA_LAUNCH_NS");
	if (ns && *ns) {
		long long n = atoll(ns);
		struct timespec t = {.tv_sec = n / 1000000000, .tv_nsec = n % 1000000000};
		nanosleep(&t, NULL);
	}
	if (f && f != (void *)1 && args)
		fake_kernel((const char *)f, args);
	return OK;
}

CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = (void *)2; return OK; }
CUresult cuStreamBeginCapture_v2(void *s, int mode) { (void)s; (void)mode; return NOT_SUPPORTED; }
CUresult cuStreamEndCapture(void *s, void **g) { (void)s; (void)g; return NOT_SUPPORTED; }
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) { (void)e; (void)g; (void)f; return NOT_SUPPORTED; }
CUresult cuGraphLaunch(void *e, void *s) { (void)e; (void)s; return NOT_SUPPORTED; }

/* Events hold the host clock when recorded: the work before them is done. */
CUresult cuEventCreate(int64_t **e, unsigned flags)
{
	(void)flags;
	*e = calloc(1, sizeof **e);
	return *e ? OK : OUT_OF_MEMORY;
}
CUresult cuEventRecord(int64_t *e, void *s) { (void)s; *e = mono_ns(); return OK; }
CUresult cuEventSynchronize(int64_t *e) { (void)e; return OK; }
CUresult cuEventElapsedTime_v2(float *ms, int64_t *a, int64_t *b) { *ms = (float)((double)(*b - *a) / 1e6); return OK; }

CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return OUT_OF_MEMORY;
	*d = (CUdeviceptr)(uintptr_t)p;
	return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { memcpy((void *)(uintptr_t)d, h, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { memcpy(h, (void *)(uintptr_t)d, n); return OK; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr a, CUdeviceptr b, size_t n, void *s) { (void)s; memmove((void *)(uintptr_t)a, (void *)(uintptr_t)b, n); return OK; }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n)
{
	uint32_t *p = (uint32_t *)(uintptr_t)d;
	for (size_t i = 0; i < n; i++)
		p[i] = v;
	return OK;
}

/* The virtual memory management API: a handle is a memory file. */
struct alloc {
	int fd;
	size_t size;
};

enum { GRANULARITY = 2 << 20 }; /* the H200's */

CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option)
{
	(void)prop, (void)option;
	*g = GRANULARITY;
	return OK;
}

static CUresult handle(unsigned long long *h, int fd)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return INVALID_VALUE;
	struct alloc *a = malloc(sizeof *a);
	if (!a)
		return OUT_OF_MEMORY;
	a->fd = fd;
	a->size = (size_t)st.st_size;
	*h = (unsigned long long)(uintptr_t)a;
	return OK;
}

CUresult cuMemCreate(unsigned long long *h, size_t size, const void *prop, unsigned long long flags)
{
	(void)prop, (void)flags;
	if (size == 0 || size % GRANULARITY != 0)
		return INVALID_VALUE;
	int fd = memfd_create("fakecuda", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		return OUT_OF_MEMORY;
	return handle(h, fd);
}

CUresult cuMemRelease(unsigned long long h)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	close(a->fd);
	free(a);
	return OK;
}

CUresult cuMemExportToShareableHandle(void *out, unsigned long long h, int type, unsigned long long flags)
{
	(void)flags;
	if (type != 1)
		return NOT_SUPPORTED;
	int fd = fcntl(((struct alloc *)(uintptr_t)h)->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return OUT_OF_MEMORY;
	memcpy(out, &fd, sizeof fd);
	return OK;
}

CUresult cuMemImportFromShareableHandle(unsigned long long *h, void *os, int type)
{
	if (type != 1)
		return NOT_SUPPORTED;
	int fd = fcntl((int)(uintptr_t)os, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return INVALID_VALUE;
	CUresult rc = handle(h, fd);
	if (rc != OK)
		close(fd);
	return rc;
}

CUresult cuMemAddressReserve(CUdeviceptr *d, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags)
{
	(void)align, (void)addr, (void)flags;
	void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return OUT_OF_MEMORY;
	*d = (CUdeviceptr)(uintptr_t)p;
	return OK;
}

CUresult cuMemAddressFree(CUdeviceptr d, size_t size) { return munmap((void *)(uintptr_t)d, size) == 0 ? OK : INVALID_VALUE; }

/* A mapping gives no access until cuMemSetAccess, as the driver's. */
CUresult cuMemMap(CUdeviceptr d, size_t size, size_t offset, unsigned long long h, unsigned long long flags)
{
	(void)flags;
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	if (offset + size > a->size)
		return INVALID_VALUE;
	void *p = mmap((void *)(uintptr_t)d, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, (off_t)offset);
	return p == MAP_FAILED ? INVALID_VALUE : OK;
}

CUresult cuMemUnmap(CUdeviceptr d, size_t size)
{
	void *p = mmap((void *)(uintptr_t)d, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? INVALID_VALUE : OK;
}

CUresult cuMemSetAccess(CUdeviceptr d, size_t size, const void *desc, size_t count)
{
	(void)desc, (void)count;
	return mprotect((void *)(uintptr_t)d, size, PROT_READ | PROT_WRITE) == 0 ? OK : INVALID_VALUE;
}

/* NVML: one idle device, the monitor's own context its only process. */
typedef struct {
	unsigned long long referenceTime, violationTime;
} violation;

int nvmlInit_v2(void) { return 0; }
const char *nvmlErrorString(int rc) { (void)rc; return "fakecuda: nvml error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **d) { (void)bus; *d = (void *)1; return 0; }
int nvmlDeviceGetName(void *d, char *name, unsigned n) { (void)d; strncpy(name, "fakecuda", n); return 0; }
int nvmlSystemGetDriverVersion(char *v, unsigned n) { strncpy(v, "0.0", n); return 0; }
int nvmlDeviceGetClockInfo(void *d, int which, unsigned *mhz) { (void)d; *mhz = which == 1 ? 1980 : 3201; return 0; }
int nvmlDeviceGetTemperature(void *d, int s, unsigned *c) { (void)d; (void)s; *c = 30; return 0; }
int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) { (void)d; *mw = 100000; return 0; }
int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) { (void)d; *r = 0; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, void *procs) { (void)d; (void)procs; *n = 1; return 0; }
int nvmlDeviceGetViolationStatus(void *d, int policy, violation *v) { (void)d; (void)policy; v->referenceTime = v->violationTime = 0; return 0; }
