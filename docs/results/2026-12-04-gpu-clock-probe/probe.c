/* Two questions for the design of a GPU clock route code cannot bend
 * (issue 27, docs/gpu-clock.md), asked on the H200:
 *
 *   probe idle N            N launches of an empty kernel from a clean
 *                           process, each timed on the host from launch to
 *                           stream synchronisation: percentiles in us.
 *   probe spin NS COUNT B   a busy process: COUNT back-to-back kernels of B
 *                           blocks that each spin NS ns on %globaltimer.
 *   probe share            a clean process makes 64 MiB of device memory
 *                           with cuMemCreate, exported as a POSIX file
 *                           descriptor, writes a pattern, and runs argv
 *                           after "--" with the descriptor as fd 3; the
 *                           child (probe import, in a sandbox) maps it,
 *                           checks the pattern and writes another, which
 *                           the parent checks.
 *   probe import            the child's side.
 *   probe wait MS K         a process whose stream waits on a device flag
 *                           (cuStreamWaitValue32) with K spin kernels of
 *                           1 us queued behind it, its host idle for MS ms,
 *                           then the flag set: does a probe from another
 *                           process see work queued behind a wait?
 *   probe switch N GAP_US   a process that runs N kernels of 10 us, each
 *                           synchronised, GAP_US apart: what another
 *                           context's probe pays just after it.
 *   probe map MB R          R rounds of mapping MB MiB of exported
 *                           cuMemCreate memory imported from its file
 *                           descriptor (import, reserve, map, access) and
 *                           unmapping it: the cost of a fresh mapping per
 *                           sample, in us.
 *
 * Built on the GPU machine: gcc -O2 -I/usr/local/cuda/include probe.c
 * -L/usr/local/cuda/lib64/stubs -lcuda -o probe */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static const char *ptx =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry empty() { ret; }\n"
	".visible .entry spin(.param .u64 ns) {\n"
	" .reg .u64 %t0, %t1, %d, %n; .reg .pred %p;\n"
	" ld.param.u64 %n, [ns];\n"
	" mov.u64 %t0, %globaltimer;\n"
	"L: mov.u64 %t1, %globaltimer; sub.u64 %d, %t1, %t0; setp.lt.u64 %p, %d, %n; @%p bra L;\n"
	" ret; }\n";

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_ = 0; cuGetErrorString(r_, &s_); fprintf(stderr, "%s: %s\n", #x, s_ ? s_ : "?"); exit(2); } } while (0)

static CUcontext ctx;
static CUmodule mod;
static CUfunction f_empty, f_spin;

static void init(void)
{
	CUdevice dev;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev)); /* cuCtxCreate's signature changed in CUDA 13 */
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&f_empty, mod, "empty"));
	CK(cuModuleGetFunction(&f_spin, mod, "spin"));
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (t.tv_sec % 1000) * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int idle(int n)
{
	init();
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	double *v = malloc(n * sizeof *v);
	double w0 = wall_ms();
	for (int i = -10; i < n; i++) {
		double t0 = now_us();
		CK(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, s, 0, 0));
		CK(cuStreamSynchronize(s));
		if (i >= 0)
			v[i] = now_us() - t0;
	}
	double w1 = wall_ms();
	qsort(v, n, sizeof *v, cmp);
	printf("probe at wall %.1f-%.1f ms: ", w0, w1);
	printf("probe latency us over %d: min %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f\n", n, v[0], v[n / 10], v[n / 2], v[n * 9 / 10], v[n * 99 / 100], v[n - 1]);
	return 0;
}

static int spin(uint64_t ns, int count, int blocks)
{
	init();
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	double t0 = now_us(), w0 = wall_ms();
	for (int i = 0; i < count; i++) {
		void *args[] = {&ns};
		CK(cuLaunchKernel(f_spin, blocks, 1, 1, 128, 1, 1, 0, s, args, 0));
	}
	CK(cuStreamSynchronize(s));
	printf("spin at wall %.1f-%.1f ms: %d kernels of %llu ns, %d blocks, in %.0f us\n", w0, wall_ms(), count, (unsigned long long)ns, blocks, now_us() - t0);
	return 0;
}

static int waitq(int ms, int k)
{
	init();
	CUstream s, w;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
	CUdeviceptr flag;
	CK(cuMemAlloc(&flag, 4));
	CK(cuMemsetD32(flag, 0, 1));
	CK(cuCtxSynchronize());
	CK(cuStreamWaitValue32(s, flag, 1, CU_STREAM_WAIT_VALUE_EQ));
	uint64_t ns = 1000;
	for (int i = 0; i < k; i++) {
		void *args[] = {&ns};
		CK(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, s, args, 0));
	}
	double w0 = wall_ms(), t0 = now_us();
	usleep(ms * 1000);
	CK(cuStreamWriteValue32(w, flag, 1, 0));
	CK(cuStreamSynchronize(s));
	printf("wait at wall %.1f-%.1f ms: a stream waited on a flag %d ms with %d kernels behind it; they ran %.0f us after the flag was set\n", w0, wall_ms(), ms, k, now_us() - t0 - ms * 1000.0);
	return 0;
}

static int switcher(int n, int gap)
{
	init();
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint64_t ns = 10000;
	double w0 = wall_ms();
	for (int i = 0; i < n; i++) {
		void *args[] = {&ns};
		CK(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, s, args, 0));
		CK(cuStreamSynchronize(s));
		usleep(gap);
	}
	printf("switch at wall %.1f-%.1f ms: %d kernels of 10 us, %d us apart\n", w0, wall_ms(), n, gap);
	return 0;
}

static int mapper(int mb, int rounds)
{
	init();
	CUdevice dev;
	CK(cuCtxGetDevice(&dev));
	size_t bytes = (size_t)mb << 20;
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemGenericAllocationHandle h;
	CK(cuMemCreate(&h, bytes, &p, 0));
	int fd = -1;
	CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	double *v = malloc(rounds * sizeof *v), *u = malloc(rounds * sizeof *u);
	CUmemAccessDesc a = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	for (int i = 0; i < rounds; i++) {
		double t0 = now_us();
		CUmemGenericAllocationHandle g;
		CK(cuMemImportFromShareableHandle(&g, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
		CUdeviceptr d;
		CK(cuMemAddressReserve(&d, bytes, 0, 0, 0));
		CK(cuMemMap(d, bytes, 0, g, 0));
		CK(cuMemSetAccess(d, bytes, &a, 1));
		CK(cuMemsetD32(d, i, 1));
		CK(cuCtxSynchronize());
		double t1 = now_us();
		CK(cuMemUnmap(d, bytes));
		CK(cuMemAddressFree(d, bytes));
		CK(cuMemRelease(g));
		v[i] = t1 - t0;
		u[i] = now_us() - t1;
	}
	qsort(v, rounds, sizeof *v, cmp);
	qsort(u, rounds, sizeof *u, cmp);
	printf("map %d MiB over %d rounds: import+reserve+map+access+first write us: min %.1f p50 %.1f max %.1f; unmap+free+release us: min %.1f p50 %.1f max %.1f\n", mb, rounds, v[0], v[rounds / 2], v[rounds - 1], u[0], u[rounds / 2], u[rounds - 1]);
	return 0;
}

static const size_t share_bytes = 64 << 20;

static int share(char **argv)
{
	init();
	CUdevice dev;
	CK(cuCtxGetDevice(&dev));
	int ok = 0;
	CK(cuDeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
	printf("share: POSIX fd handles supported: %d\n", ok);
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	size_t gran = 0;
	CK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CUmemGenericAllocationHandle h;
	CK(cuMemCreate(&h, share_bytes, &p, 0));
	CUdeviceptr d;
	CK(cuMemAddressReserve(&d, share_bytes, 0, 0, 0));
	CK(cuMemMap(d, share_bytes, 0, h, 0));
	CUmemAccessDesc a = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CK(cuMemSetAccess(d, share_bytes, &a, 1));
	CK(cuMemsetD32(d, 0x12345678u, share_bytes / 4));
	int fd = -1;
	CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	printf("share: granularity %zu, exported fd %d\n", gran, fd);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd, 3);
		execvp(argv[0], argv);
		perror("exec");
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	uint32_t *buf = malloc(share_bytes);
	CK(cuMemcpyDtoH(buf, d, share_bytes));
	size_t bad = 0;
	for (size_t i = 0; i < share_bytes / 4; i++)
		bad += buf[i] != 0x9ABCDEF0u;
	printf("share: child exit %d; parent reads the child's pattern: %zu of %zu words differ\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, bad, share_bytes / 4);
	return bad != 0;
}

static int import(void)
{
	init();
	CUdevice dev;
	CK(cuCtxGetDevice(&dev));
	CUmemGenericAllocationHandle h;
	CK(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)3, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	CUdeviceptr d;
	CK(cuMemAddressReserve(&d, share_bytes, 0, 0, 0));
	CK(cuMemMap(d, share_bytes, 0, h, 0));
	CUmemAccessDesc a = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CK(cuMemSetAccess(d, share_bytes, &a, 1));
	uint32_t *buf = malloc(share_bytes);
	CK(cuMemcpyDtoH(buf, d, share_bytes));
	size_t bad = 0;
	for (size_t i = 0; i < share_bytes / 4; i++)
		bad += buf[i] != 0x12345678u;
	printf("import: pid %d reads the parent's pattern: %zu words differ\n", (int)getpid(), bad);
	CK(cuMemsetD32(d, 0x9ABCDEF0u, share_bytes / 4));
	CK(cuCtxSynchronize());
	return bad != 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "idle"))
		return idle(atoi(argv[2]));
	if (argc >= 5 && !strcmp(argv[1], "spin"))
		return spin(strtoull(argv[2], 0, 10), atoi(argv[3]), atoi(argv[4]));
	if (argc >= 4 && !strcmp(argv[1], "share") && !strcmp(argv[2], "--"))
		return share(argv + 3);
	if (argc >= 4 && !strcmp(argv[1], "wait"))
		return waitq(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "switch"))
		return switcher(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "map"))
		return mapper(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 2 && !strcmp(argv[1], "import"))
		return import();
	fprintf(stderr, "usage: probe idle N | spin NS COUNT BLOCKS | share -- CMD... | import | wait MS K | switch N GAP_US | map MB ROUNDS\n");
	return 2;
}
