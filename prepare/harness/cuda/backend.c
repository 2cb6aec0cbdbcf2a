/* backend.c: the CUDA back end of harness.c (docs/gpu.md), included by it
 * when built with -DTILEPIPE_CUDA:
 *
 *     cc -O2 -DTILEPIPE_CUDA -o cuda-timer harness.c -ldl
 *
 * The visit file names the kernel (`cubin PATH`) and its launch (`launch
 * PATH`, the internal/launch Lines form); without them the timer calls an
 * object route's entry, `int tilepipe_entry(void *const *device_buffers,
 * void *stream)`, linked with it, on the default stream. Every memory file replay hands
 * over has a device mirror of the same layout (gaps and canaries
 * included); a set's buffers are device pointers into it. Inputs are
 * sealed, so they are uploaded once; after validation and after timing the
 * whole of every input mirror is compared with its file, and every output
 * mirror's gaps with the canaries. With "l2 flush" a buffer of twice the
 * device's L2 is written before every sample, on the stream the sample's
 * first event is recorded on, so the flush is done before the span starts
 * and never inside it. The driver is loaded at run time, so this compiles
 * anywhere. */

#include <dlfcn.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
/* The virtual memory management API's structures, as cuda.h lays them
 * out (CUDA 10.2 to 13). */
typedef struct {
	int type; /* CU_MEM_LOCATION_TYPE_DEVICE: 1 */
	int id;
} CUmemLocation;
typedef struct {
	int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED: 1 */
	int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: 1 */
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType, gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;
typedef struct {
	CUmemLocation location;
	int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE: 3 */
} CUmemAccessDesc;
enum { CU_HANDLE_POSIX_FD = 1 };

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*CtxSynchronize)(void);
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*EventCreate)(CUevent *, unsigned);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*FuncSetAttribute)(CUfunction, int, int);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamBeginCapture)(CUstream, int);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*MemExport)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
	CUresult (*MemImport)(CUmemGenericAllocationHandle *, void *, int);
	CUresult (*MemGranularity)(size_t *, const CUmemAllocationProp *, int);
} cu;

static void *cu_lib;

/* ENTRY_FAILED is what gpu_launch returns for an object entry that
 * returned non-zero: no driver error has this number. */
enum { ENTRY_FAILED = -1 };
static int entry_rc;

static void *cu_sym(const char *a, const char *b)
{
	void *p = dlsym(cu_lib, a);
	if (!p && b)
		p = dlsym(cu_lib, b);
	if (!p)
		die("libcuda.so.1: no %s", a);
	return p;
}

/* cu_load loads the driver library: also what --closure does first, so the
 * driver's files are in the closure prepare pins. */
static void cu_load(void)
{
	if (cu_lib)
		return;
	cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu_lib)
		die("dlopen libcuda.so.1: %s", dlerror());
	cu.Init = cu_sym("cuInit", 0);
	cu.DeviceGet = cu_sym("cuDeviceGet", 0);
	cu.PrimaryCtxRetain = cu_sym("cuDevicePrimaryCtxRetain", 0);
	cu.CtxSetCurrent = cu_sym("cuCtxSetCurrent", 0);
	cu.ModuleLoadData = cu_sym("cuModuleLoadData", 0);
	cu.ModuleGetFunction = cu_sym("cuModuleGetFunction", 0);
	cu.MemAlloc = cu_sym("cuMemAlloc_v2", 0);
	cu.MemcpyHtoD = cu_sym("cuMemcpyHtoD_v2", 0);
	cu.MemcpyDtoH = cu_sym("cuMemcpyDtoH_v2", 0);
	cu.LaunchKernel = cu_sym("cuLaunchKernel", 0);
	cu.CtxSynchronize = cu_sym("cuCtxSynchronize", 0);
	cu.GetErrorString = cu_sym("cuGetErrorString", 0);
	cu.EventCreate = cu_sym("cuEventCreate", 0);
	cu.EventRecord = cu_sym("cuEventRecord", 0);
	cu.EventSynchronize = cu_sym("cuEventSynchronize", 0);
	cu.EventElapsedTime = cu_sym("cuEventElapsedTime_v2", "cuEventElapsedTime");
	cu.FuncSetAttribute = cu_sym("cuFuncSetAttribute", 0);
	cu.DeviceGetAttribute = cu_sym("cuDeviceGetAttribute", 0);
	cu.MemsetD32 = cu_sym("cuMemsetD32_v2", 0);
	cu.DeviceGetName = cu_sym("cuDeviceGetName", 0);
	cu.MemcpyDtoDAsync = cu_sym("cuMemcpyDtoDAsync_v2", 0);
	cu.StreamCreate = cu_sym("cuStreamCreate", 0);
	cu.StreamBeginCapture = cu_sym("cuStreamBeginCapture_v2", 0);
	cu.StreamEndCapture = cu_sym("cuStreamEndCapture", 0);
	cu.GraphInstantiate = cu_sym("cuGraphInstantiateWithFlags", 0);
	cu.GraphLaunch = cu_sym("cuGraphLaunch", 0);
	cu.DeviceGetPCIBusId = cu_sym("cuDeviceGetPCIBusId", 0);
	cu.MemCreate = cu_sym("cuMemCreate", 0);
	cu.MemRelease = cu_sym("cuMemRelease", 0);
	cu.MemAddressReserve = cu_sym("cuMemAddressReserve", 0);
	cu.MemAddressFree = cu_sym("cuMemAddressFree", 0);
	cu.MemMap = cu_sym("cuMemMap", 0);
	cu.MemUnmap = cu_sym("cuMemUnmap", 0);
	cu.MemSetAccess = cu_sym("cuMemSetAccess", 0);
	cu.MemExport = cu_sym("cuMemExportToShareableHandle", 0);
	cu.MemImport = cu_sym("cuMemImportFromShareableHandle", 0);
	cu.MemGranularity = cu_sym("cuMemGetAllocationGranularity", 0);
}

/* cu_error names a driver error; "" for success. */
static const char *cu_error(CUresult rc, const char *what)
{
	static char buf[256];
	if (rc == 0)
		return "";
	if (rc == ENTRY_FAILED) {
		snprintf(buf, sizeof buf, "entry_failed: %s: the entry returned %d", what, entry_rc);
		return buf;
	}
	const char *s = "unknown";
	cu.GetErrorString(rc, &s);
	snprintf(buf, sizeof buf, "cuda_error: %s: CUDA error %d: %s", what, rc, s);
	return buf;
}

/* cu_must dies on a driver error outside a call (setup, copies). */
static void cu_must(CUresult rc, const char *what)
{
	if (rc != 0)
		die("%s", cu_error(rc, what));
}

/* Staged novel slots (novel rule 3, docs/gpu-clock.md). Replay's
 * telemetry monitor (--telemetry, a process that holds no route code)
 * makes each novel sample's slots as one fresh allocation of device
 * memory, exportable as a POSIX descriptor, holding every fresh-pool
 * memory file of the visit, whole, in param order: file i at the sum of
 * the sizes of the files before it (each a multiple of PAGE), the total
 * rounded up to the allocation granularity. It uploads what replay wrote
 * while the visit was frozen; the timer maps the allocation at a range it
 * reserved once, so every fresh set's device pointers are fixed, runs
 * the sample's calls and unmaps it before it answers; the monitor then
 * downloads and checks it. stage_prop is the allocation's properties,
 * stage_layout the offsets and the size, for both sides. */
static CUmemAllocationProp stage_prop(CUdevice dev)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = 1;
	p.requestedHandleTypes = CU_HANDLE_POSIX_FD;
	p.location.type = 1;
	p.location.id = dev;
	return p;
}

static size_t stage_layout(CUdevice dev, const size_t *sizes, size_t n, size_t *off)
{
	CUmemAllocationProp p = stage_prop(dev);
	size_t gran = 0, o = 0;
	cu_must(cu.MemGranularity(&gran, &p, 0 /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */), "cuMemGetAllocationGranularity");
	if (gran == 0 || gran % PAGE != 0)
		die("cuMemGetAllocationGranularity: %zu bytes, want a multiple of %d", gran, PAGE);
	for (size_t i = 0; i < n; i++) {
		off[i] = o;
		o += sizes[i];
	}
	return align_up(o, gran);
}

enum { MAX_LAUNCH_PARAMS = 64, MAX_LAUNCHES = 16, MAX_BUFFERS = 16 };

/* One launch: internal/launch's Lines form. */
struct launch {
	char kernel[257];
	unsigned grid[3], block[3], cluster[3], shared;
	size_t n;
	enum { LP_TENSOR, LP_I32, LP_I64, LP_F32, LP_SCRATCH, LP_BUFFER } kind[MAX_LAUNCH_PARAMS];
	size_t tensor[MAX_LAUNCH_PARAMS]; /* LP_TENSOR: signature index; LP_BUFFER: buffer index */
	unsigned char value[MAX_LAUNCH_PARAMS][8];
	uint64_t scratch_bytes[MAX_LAUNCH_PARAMS];
	int seen;
};

/* The launches of one call, in order, read from the visit's launch file
 * (one launch, or a pipeline: "buffer BYTES ALIGN" lines, then each
 * launch after a "launch" line), and the pipeline's buffers. */
static struct launch launches[MAX_LAUNCHES];
static size_t nlaunch;
static struct {
	uint64_t bytes, align;
} buffers[MAX_BUFFERS];
static size_t nbuffers;

static struct {
	CUfunction fn[MAX_LAUNCHES];
	CUdeviceptr *mirror[NPOOLS]; /* mirror[k][i]: param i's device copy of its pool-k file */
	void ****args[NPOOLS];        /* args[k][s][l]: launch l's argument pointers for set s */
	void ***ptrs[NPOOLS];         /* ptrs[k][s]: an object entry's device buffers for set s */
	int object;                   /* an object entry, not a cubin */
	unsigned char *scratch;       /* a host buffer as large as the largest file */
	CUdeviceptr buffer[MAX_BUFFERS]; /* a pipeline's buffers (0 for 0 bytes), aligned */
	unsigned char *poison;        /* a host buffer as large as the largest buffer */
	unsigned poisons;             /* how many times the buffers were poisoned */
	CUevent ev0, ev1;
	int64_t module_ns, call_ns; /* the cubin's load, the last synchronous call (cold_ns) */
	CUdevice dev;
	CUdeviceptr range;            /* the fresh sets' range: each novel sample's staged allocation is mapped here */
	size_t range_bytes;           /* the allocation's size (stage_layout) */
	CUdeviceptr flush;            /* l2 flush: the buffer written before every sample */
	size_t flush_words;           /* its size in 4-byte words (twice the L2) */
	unsigned flushes;             /* how many so far: each writes another value */
} gpu;

/* parse_launch_param reads one "param KIND A [B]" line into launch l. */
static void parse_launch_param(struct launch *l, const char *file, int lineno, const char *kind, const char *a)
{
	size_t i = l->n;
	if (i == MAX_LAUNCH_PARAMS)
		die("%s:%d: more than %d params", file, lineno, MAX_LAUNCH_PARAMS);
	uint64_t u;
	if (strcmp(kind, "tensor") == 0 && parse_u64(a, MAX_PARAMS - 1, &u)) {
		l->kind[i] = LP_TENSOR;
		l->tensor[i] = (size_t)u;
	} else if (strcmp(kind, "buffer") == 0 && parse_u64(a, MAX_BUFFERS - 1, &u)) {
		if (u >= nbuffers)
			die("%s:%d: buffer %" PRIu64 ": the file declares %zu", file, lineno, u, nbuffers);
		l->kind[i] = LP_BUFFER;
		l->tensor[i] = (size_t)u;
	} else if (strcmp(kind, "i32") == 0) {
		char *end;
		long long x = strtoll(a, &end, 10);
		if (*end || x < INT32_MIN || x > INT32_MAX)
			die("%s:%d: i32 value \"%s\"", file, lineno, a);
		int32_t y = (int32_t)x;
		l->kind[i] = LP_I32;
		memcpy(l->value[i], &y, 4);
	} else if (strcmp(kind, "i64") == 0) {
		char *end;
		long long x = strtoll(a, &end, 10);
		if (*end)
			die("%s:%d: i64 value \"%s\"", file, lineno, a);
		l->kind[i] = LP_I64;
		memcpy(l->value[i], &x, 8);
	} else if (strcmp(kind, "f32") == 0) {
		char *end;
		float x = strtof(a, &end);
		if (*end)
			die("%s:%d: f32 value \"%s\"", file, lineno, a);
		l->kind[i] = LP_F32;
		memcpy(l->value[i], &x, 4);
	} else if (strcmp(kind, "scratch") == 0 && parse_u64(a, UINT64_C(1) << 30, &u)) {
		if (u != 0)
			die("%s:%d: scratch of %" PRIu64 " bytes: not supported yet (docs/gpu.md)", file, lineno, u);
		l->kind[i] = LP_SCRATCH;
		l->scratch_bytes[i] = u;
	} else
		die("%s:%d: bad param line", file, lineno);
	l->n++;
}

static void parse_launch(const char *file)
{
	FILE *f = fopen(file, "r");
	if (!f)
		die("open %s: %s", file, strerror(errno));
	char line[512];
	int lineno = 0, pipeline = 0;
	struct launch *l = NULL;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char kind[16], a[64], b[64], extra;
		uint64_t bytes, align;
		if (strcmp(line, "launch\n") == 0) {
			if (!pipeline && l)
				die("%s:%d: \"launch\" after a launch without one: one form or the other", file, lineno);
			if (nlaunch == MAX_LAUNCHES)
				die("%s:%d: more than %d launches", file, lineno, MAX_LAUNCHES);
			pipeline = 1;
			l = &launches[nlaunch++];
			continue;
		}
		if (strncmp(line, "arch ", 5) == 0)
			continue; /* the driver checks the cubin's arch at load */
		if (sscanf(line, "buffer %" SCNu64 " %" SCNu64 " %c", &bytes, &align, &extra) == 2) {
			if (l)
				die("%s:%d: a buffer after the first launch", file, lineno);
			if (nbuffers == MAX_BUFFERS)
				die("%s:%d: more than %d buffers", file, lineno, MAX_BUFFERS);
			if (bytes > (UINT64_C(1) << 30) || align < 1 || align > 4096 || (align & (align - 1)))
				die("%s:%d: buffer of %" PRIu64 " bytes aligned to %" PRIu64 ": want at most 2^30 bytes, a power of two up to 4096", file, lineno, bytes, align);
			buffers[nbuffers].bytes = bytes;
			buffers[nbuffers].align = align;
			nbuffers++;
			continue;
		}
		if (!l) {
			if (nbuffers)
				die("%s:%d: buffers without \"launch\"", file, lineno);
			l = &launches[nlaunch++]; /* the one-launch form */
		}
		if (sscanf(line, "kernel %256s %c", l->kernel, &extra) == 1) {
			l->seen |= 1;
		} else if (sscanf(line, "grid %u %u %u %c", &l->grid[0], &l->grid[1], &l->grid[2], &extra) == 3) {
			l->seen |= 2;
		} else if (sscanf(line, "block %u %u %u %c", &l->block[0], &l->block[1], &l->block[2], &extra) == 3) {
			l->seen |= 4;
		} else if (sscanf(line, "cluster %u %u %u %c", &l->cluster[0], &l->cluster[1], &l->cluster[2], &extra) == 3) {
			if (l->cluster[0] * l->cluster[1] * l->cluster[2] != 1)
				die("%s:%d: cluster launches are not supported yet (docs/gpu.md)", file, lineno);
		} else if (sscanf(line, "shared %u %c", &l->shared, &extra) == 1) {
			l->seen |= 8;
		} else if (sscanf(line, "param %15s %63s %63s %c", kind, a, b, &extra) >= 2) {
			parse_launch_param(l, file, lineno, kind, a);
		} else
			die("%s:%d: cannot read \"%s\"", file, lineno, line);
	}
	fclose(f);
	if (nlaunch == 0)
		die("%s: want kernel, grid, block, shared and params", file);
	for (size_t i = 0; i < nlaunch; i++)
		if (launches[i].seen != 15 || launches[i].n == 0)
			die("%s: launch %zu: want kernel, grid, block, shared and params", file, i);
	for (size_t b = 0; b < nbuffers; b++) {
		int used = 0;
		for (size_t i = 0; i < nlaunch; i++)
			for (size_t j = 0; j < launches[i].n; j++)
				used |= launches[i].kind[j] == LP_BUFFER && launches[i].tensor[j] == b;
		if (!used)
			die("%s: buffer %zu: passed to no launch", file, b);
	}
}

/* gpu_buffers allocates a pipeline's buffers, each aligned as declared
 * (0 bytes: a null pointer). */
static void gpu_buffers(void)
{
	uint64_t largest = 0;
	for (size_t b = 0; b < nbuffers; b++) {
		if (buffers[b].bytes == 0)
			continue;
		CUdeviceptr d;
		cu_must(cu.MemAlloc(&d, buffers[b].bytes + buffers[b].align), "cuMemAlloc (a pipeline buffer)");
		gpu.buffer[b] = (d + buffers[b].align - 1) & ~(CUdeviceptr)(buffers[b].align - 1);
		if (buffers[b].bytes > largest)
			largest = buffers[b].bytes;
	}
	gpu.poison = xmalloc(largest ? largest : 1);
}

/* gpu_poison_buffers fills every buffer with a poison (NaN, then a huge
 * finite value, in turn) before a validation call: a pipeline may rely on
 * nothing a call before it left in its buffers. */
static void gpu_poison_buffers(void)
{
	unsigned char byte = gpu.poisons++ % 2 ? 0x7f : 0xff;
	for (size_t b = 0; b < nbuffers; b++) {
		if (buffers[b].bytes == 0)
			continue;
		memset(gpu.poison, byte, buffers[b].bytes);
		cu_must(cu.MemcpyHtoD(gpu.buffer[b], gpu.poison, buffers[b].bytes), "poison a pipeline buffer");
	}
}

/* gpu_init loads the kernel, makes every device mirror (a copy of each
 * memory file: canaries, fill and inputs alike) and every set's
 * argument list. */
/* gpu_context makes the device's primary context current: the one the
 * CUDA runtime (and so an object route's libraries) uses too. */
static void gpu_context(void)
{
	cu_load();
	cu_must(cu.Init(0), "cuInit");
	CUdevice dev;
	CUcontext ctx;
	cu_must(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	gpu.dev = dev;
	cu_must(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	cu_must(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
	cu_must(cu.EventCreate(&gpu.ev0, 0), "cuEventCreate");
	cu_must(cu.EventCreate(&gpu.ev1, 0), "cuEventCreate");
	if (l2_flush == 1) {
		int l2 = 0;
		cu_must(cu.DeviceGetAttribute(&l2, 38 /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE */, dev), "cuDeviceGetAttribute");
		if (l2 <= 0)
			die("l2 flush: the device reports an L2 of %d bytes", l2);
		gpu.flush_words = (2 * (size_t)l2 + 3) / 4;
		cu_must(cu.MemAlloc(&gpu.flush, gpu.flush_words * 4), "cuMemAlloc (the L2 flush buffer)");
		fprintf(stderr, "cuda-timer: l2 flush: %zu bytes written before every sample (L2: %d bytes)\n",
			gpu.flush_words * 4, l2);
	}
}

/* gpu_flush writes the flush buffer ("l2 flush"), queued on the stream
 * the next sample's first event is recorded on, so the flush ends before
 * the span begins; a no-op under "l2 warm". */
static void gpu_flush(void)
{
	if (l2_flush != 1)
		return;
	cu_must(cu.MemsetD32(gpu.flush, 0x9E3779B9u + ++gpu.flushes, gpu.flush_words), "cuMemsetD32 (the L2 flush)");
}

/* gpu_mirrors makes every warm memory file's device mirror (a copy of
 * the file: canaries, fill and inputs alike) and reserves the fresh
 * sets' range, where each novel sample's staged allocation is mapped
 * (stage_layout): mirror[FRESH][i] is param i's fresh file there. It
 * returns the largest warm file's size. */
static size_t gpu_mirrors(struct visit *v)
{
	size_t largest = 0;
	for (int k = 0; k < NPOOLS; k++)
		gpu.mirror[k] = xmalloc(v->nparams * sizeof(CUdeviceptr));
	size_t sizes[MAX_PARAMS], off[MAX_PARAMS];
	for (size_t i = 0; i < v->nparams; i++) {
		struct region *g = &v->params[i].reg[WARM];
		cu_must(cu.MemAlloc(&gpu.mirror[WARM][i], g->size), "cuMemAlloc");
		cu_must(cu.MemcpyHtoD(gpu.mirror[WARM][i], g->map, g->size), "upload a memory file");
		largest = g->size > largest ? g->size : largest;
		sizes[i] = v->params[i].reg[FRESH].size;
	}
	gpu.range_bytes = stage_layout(gpu.dev, sizes, v->nparams, off);
	cu_must(cu.MemAddressReserve(&gpu.range, gpu.range_bytes, 0, 0, 0), "cuMemAddressReserve (the fresh sets' range)");
	for (size_t i = 0; i < v->nparams; i++)
		gpu.mirror[FRESH][i] = gpu.range + off[i];
	return largest;
}

static void gpu_init_object(struct visit *v);

static void gpu_init(struct visit *v)
{
	if (!cubin_path && !launch_path) {
		if (!cuda_entry)
			die("%s: no \"cubin PATH\" and \"launch PATH\", and no object entry linked", v->file);
		gpu_init_object(v);
		return;
	}
	if (!cubin_path || !launch_path)
		die("%s: a CUDA timer wants \"cubin PATH\" and \"launch PATH\"", v->file);
	if (cuda_entry)
		die("%s: a cubin for a timer linked with an object entry", v->file);
	parse_launch(launch_path);
	for (size_t l = 0; l < nlaunch; l++)
		for (size_t i = 0; i < launches[l].n; i++)
			if (launches[l].kind[i] == LP_TENSOR && launches[l].tensor[i] >= v->nparams)
				die("%s: launch %zu param %zu: tensor %zu, the visit has %zu params", launch_path, l, i, launches[l].tensor[i], v->nparams);
	FILE *f = fopen(cubin_path, "rb");
	if (!f)
		die("open %s: %s", cubin_path, strerror(errno));
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *cubin = xmalloc((size_t)sz);
	if (sz <= 0 || fread(cubin, 1, (size_t)sz, f) != (size_t)sz)
		die("read %s", cubin_path);
	fclose(f);

	gpu_context();
	CUmodule mod;
	int64_t t0 = mono_ns();
	cu_must(cu.ModuleLoadData(&mod, cubin), "cuModuleLoadData");
	for (size_t l = 0; l < nlaunch; l++) {
		cu_must(cu.ModuleGetFunction(&gpu.fn[l], mod, launches[l].kernel), "cuModuleGetFunction");
		if (launches[l].shared > 48 * 1024)
			cu_must(cu.FuncSetAttribute(gpu.fn[l], 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, (int)launches[l].shared), "cuFuncSetAttribute");
	}
	gpu.module_ns = mono_ns() - t0;
	gpu_buffers();
	size_t largest = gpu_mirrors(v);
	for (int k = 0; k < NPOOLS; k++) {
		uint64_t sets = v->pools[k].sets;
		gpu.args[k] = xmalloc(sets * sizeof(void ***));
		for (uint64_t s = 0; s < sets; s++) {
			gpu.args[k][s] = xmalloc(nlaunch * sizeof(void **));
			for (size_t l = 0; l < nlaunch; l++) {
				const struct launch *ln = &launches[l];
				void **a = xmalloc(ln->n * sizeof(void *));
				unsigned char(*slot)[8] = xmalloc(ln->n * 8);
				for (size_t j = 0; j < ln->n; j++) {
					memset(slot[j], 0, 8);
					if (ln->kind[j] == LP_TENSOR) {
						const struct param *p = &v->params[ln->tensor[j]];
						CUdeviceptr d = gpu.mirror[k][ln->tensor[j]] + set_offset(p->bytes, &v->pools[k], s);
						memcpy(slot[j], &d, sizeof d);
					} else if (ln->kind[j] == LP_BUFFER)
						memcpy(slot[j], &gpu.buffer[ln->tensor[j]], sizeof(CUdeviceptr));
					else if (ln->kind[j] != LP_SCRATCH)
						memcpy(slot[j], ln->value[j], 8);
					a[j] = slot[j];
				}
				gpu.args[k][s][l] = a;
			}
		}
	}
	gpu.scratch = xmalloc(largest);
}

/* gpu_init_object prepares an object entry's calls: per set, the device
 * pointers of its buffers in signature order. */
static void gpu_init_object(struct visit *v)
{
	gpu.object = 1;
	gpu_context();
	size_t largest = gpu_mirrors(v);
	for (int k = 0; k < NPOOLS; k++) {
		uint64_t sets = v->pools[k].sets;
		gpu.ptrs[k] = xmalloc(sets * sizeof(void **));
		for (uint64_t s = 0; s < sets; s++) {
			void **p = xmalloc(v->nparams * sizeof(void *));
			for (size_t i = 0; i < v->nparams; i++)
				p[i] = (void *)(uintptr_t)(gpu.mirror[k][i] + set_offset(v->params[i].bytes, &v->pools[k], s));
			gpu.ptrs[k][s] = p;
		}
	}
	gpu.scratch = xmalloc(largest);
}

/* gpu_launch_on is one call on set s of pool k, queued on stream st: an
 * object entry, or every launch of the cubin in order. */
static CUresult gpu_launch_on(int k, uint64_t s, CUstream st)
{
	if (gpu.object) {
		int rc = cuda_entry(gpu.ptrs[k][s], st);
		if (rc != 0) {
			entry_rc = rc;
			return ENTRY_FAILED;
		}
		return 0;
	}
	for (size_t l = 0; l < nlaunch; l++) {
		const struct launch *ln = &launches[l];
		CUresult rc = cu.LaunchKernel(gpu.fn[l], ln->grid[0], ln->grid[1], ln->grid[2], ln->block[0], ln->block[1], ln->block[2],
					      ln->shared, st, gpu.args[k][s][l], 0);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static CUresult gpu_launch(int k, uint64_t s)
{
	return gpu_launch_on(k, s, 0);
}

/* gpu_outputs copies set s's outputs between the memory files and the
 * mirrors: up (the poison before a validation call) or down (what the
 * kernel wrote). */
static void gpu_outputs(struct visit *v, int k, uint64_t s, int up)
{
	if (up)
		gpu_poison_buffers();
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		size_t off = set_offset(p->bytes, &v->pools[k], s);
		if (up)
			cu_must(cu.MemcpyHtoD(gpu.mirror[k][i] + off, p->reg[k].map + off, p->bytes), "upload an output");
		else
			cu_must(cu.MemcpyDtoH(p->reg[k].map + off, gpu.mirror[k][i] + off, p->bytes), "download an output");
	}
}

/* gpu_warm_fill copies every warm output memory file, whole, up to its
 * mirror. serve calls it before the first timed command: replay has by
 * then read the validated outputs and written its fill over them, so the
 * timed calls start from the fill on the device as on the host, and a
 * kernel that stops writing after validation leaves the fill, which the
 * after-timing comparison catches (without it the mirrors kept the
 * validated answers through every sample). */
static void gpu_warm_fill(struct visit *v)
{
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		if (p->role == ROLE_OUTPUT)
			cu_must(cu.MemcpyHtoD(gpu.mirror[WARM][i], p->reg[WARM].map, p->reg[WARM].size), "upload the warm outputs' fill");
	}
	cu_must(cu.CtxSynchronize(), "cuCtxSynchronize");
}

/* gpu_call is one synchronous call on set s of pool k, as the CPU entry
 * is: launch, then wait for the whole device (work the kernel left on
 * another stream too). 0 on success, else the reason in r. */
static int gpu_call(struct visit *v, struct report *r, int k, uint64_t s)
{
	int64_t t0 = mono_ns();
	const char *e = cu_error(gpu_launch(k, s), "cuLaunchKernel");
	if (!*e)
		e = cu_error(cu.CtxSynchronize(), "cuCtxSynchronize");
	gpu.call_ns = mono_ns() - t0;
	if (*e) {
		snprintf(r->reason, sizeof r->reason, "%s", e);
		return 1;
	}
	gpu_outputs(v, k, s, 0);
	return 0;
}

/* gpu_check compares every warm mirror with its memory file: an input's
 * bytes all (the file is sealed), an output's gaps (the canaries). The
 * fresh sets live in each novel sample's staged allocation, which the
 * monitor checks after the sample. */
static int gpu_check(struct visit *v, struct report *r, const char *suffix)
{
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		for (int k = 0; k < FRESH; k++) {
			struct region *g = &p->reg[k];
			cu_must(cu.MemcpyDtoH(gpu.scratch, gpu.mirror[k][i], g->size), "download a mirror");
			if (p->role == ROLE_INPUT) {
				size_t off = first_diff(gpu.scratch, g->map, g->size);
				if (off < g->size) {
					snprintf(r->reason, sizeof r->reason, "input_written: %s %s byte %zu (device)%s", p->name,
						 pool_names[k], off, suffix);
					return 0;
				}
				continue;
			}
			size_t o = 0;
			for (uint64_t s = 0; s <= v->pools[k].sets; s++) {
				size_t end = s < v->pools[k].sets ? set_offset(p->bytes, &v->pools[k], s) : g->size;
				for (; o < end; o++)
					if (gpu.scratch[o] != canary(o)) {
						snprintf(r->reason, sizeof r->reason, "guard_overwritten: %s %s byte %zu (device)%s",
							 p->name, pool_names[k], o, suffix);
						return 0;
					}
				o = end + p->bytes;
			}
		}
	}
	return 1;
}

/* gpu_sample times n calls, call i on set (*cursor + i) mod nsets of pool
 * k: an event before the first launch, the calls, a synchronisation of the
 * whole device, an event after it. The events' span (what the GPU took,
 * every stream's work included) is the sample's. */
static int64_t gpu_sample(int k, uint64_t first, uint64_t n, uint64_t nsets, uint64_t *cursor)
{
	uint64_t s = *cursor;
	CUresult rc = cu.EventRecord(gpu.ev0, 0);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		rc = gpu_launch(k, first + s);
		if (++s == nsets)
			s = 0;
	}
	/* The second event is recorded after the whole device is idle, so the
	 * span holds work an entry left on another stream too (docs/gpu.md). */
	if (rc == 0)
		rc = cu.CtxSynchronize();
	if (rc == 0)
		rc = cu.EventRecord(gpu.ev1, 0);
	if (rc == 0)
		rc = cu.EventSynchronize(gpu.ev1);
	float ms = 0;
	if (rc == 0)
		rc = cu.EventElapsedTime(&ms, gpu.ev0, gpu.ev1);
	*cursor = s;
	timed_rc |= rc;
	return (int64_t)((double)ms * 1e6);
}

/* gpu_novel_staged times a novel sample of n calls, call i on fresh set
 * i, on the allocation replay's monitor staged (fd, its POSIX
 * descriptor, which the command carried): imported and mapped at the
 * fresh sets' range, the calls timed as gpu_sample times them, the range
 * unmapped before the answer, so no call of the visit can reach the
 * slots once it has answered. Replay's span, which holds all of it, is
 * the sample's time; the events are its cross-check. No L2 flush here:
 * the monitor flushes after its upload, outside the span. */
static int64_t gpu_novel_staged(int fd, uint64_t n)
{
	CUmemGenericAllocationHandle h;
	CUresult rc = cu.MemImport(&h, (void *)(uintptr_t)fd, CU_HANDLE_POSIX_FD);
	close(fd);
	cu_must(rc, "cuMemImportFromShareableHandle (a novel sample's staged slots)");
	cu_must(cu.MemMap(gpu.range, gpu.range_bytes, 0, h, 0), "cuMemMap (a novel sample's staged slots)");
	CUmemAccessDesc a = {{1, gpu.dev}, 3};
	cu_must(cu.MemSetAccess(gpu.range, gpu.range_bytes, &a, 1), "cuMemSetAccess (a novel sample's staged slots)");
	cu_must(cu.MemRelease(h), "cuMemRelease (a novel sample's staged slots)"); /* the mapping holds it */
	int64_t ns = gpu_sample(FRESH, 0, n, n, &(uint64_t){0});
	cu_must(cu.MemUnmap(gpu.range, gpu.range_bytes), "cuMemUnmap (a novel sample's staged slots)");
	return ns;
}

/* Graph samples ("graph N" in the visit, "graph SEQ R" commands): the
 * first command captures N calls, call i on warm set i mod the warm sets,
 * from a stream of its own (blocking, so it waits for the L2 flush queued
 * on the default stream after it exists) into a CUDA graph and
 * instantiates it; every command replays it R times between two events on
 * that stream, the whole device synchronised before the second, as a
 * stream sample is. A CUDA error in any of it ends the visit at once with
 * the driver's words (the context may be unusable after it). */
static struct {
	CUstream s;
	CUgraphExec exec;
	int built;
} graph;

static void gpu_graph_must(CUresult rc, const char *what)
{
	if (rc != 0)
		die("%s (graph sample)", cu_error(rc, what));
}

/* gpu_graph_build captures and instantiates the graph, once. */
static void gpu_graph_build(struct visit *v)
{
	if (graph.built)
		return;
	graph.built = 1;
	gpu_graph_must(cu.StreamCreate(&graph.s, 0 /* CU_STREAM_DEFAULT: synchronises with the default stream */), "cuStreamCreate");
	gpu_graph_must(cu.StreamBeginCapture(graph.s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */), "cuStreamBeginCapture");
	uint64_t nsets = v->pools[WARM].sets;
	CUresult rc = 0;
	for (uint64_t i = 0; i < graph_batch && rc == 0; i++)
		rc = gpu_launch_on(WARM, i % nsets, graph.s);
	CUgraph g = 0;
	CUresult end = cu.StreamEndCapture(graph.s, &g); /* always: the stream leaves capture */
	gpu_graph_must(rc, gpu.object ? "the entry, captured" : "cuLaunchKernel, captured");
	gpu_graph_must(end, "cuStreamEndCapture");
	/* CU_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, as PyTorch's graphs:
	 * an entry's allocations captured without their frees. */
	gpu_graph_must(cu.GraphInstantiate(&graph.exec, g, 1), "cuGraphInstantiateWithFlags");
}

static int64_t gpu_graph_sample(uint64_t r)
{
	gpu_graph_must(cu.EventRecord(gpu.ev0, graph.s), "cuEventRecord");
	for (uint64_t i = 0; i < r; i++)
		gpu_graph_must(cu.GraphLaunch(graph.exec, graph.s), "cuGraphLaunch");
	gpu_graph_must(cu.CtxSynchronize(), "cuCtxSynchronize");
	gpu_graph_must(cu.EventRecord(gpu.ev1, graph.s), "cuEventRecord");
	gpu_graph_must(cu.EventSynchronize(gpu.ev1), "cuEventSynchronize");
	float ms = 0;
	gpu_graph_must(cu.EventElapsedTime(&ms, gpu.ev0, gpu.ev1), "cuEventElapsedTime");
	return (int64_t)((double)ms * 1e6);
}

/* --ceilings [LIBCUBLAS]: what this GPU delivers, for replay's GPU floors
 * and each row's fraction of them (docs/gpu.md, "Ceilings"): the
 * device-to-device copy bandwidth (1 GiB copied between two buffers,
 * bytes read plus written) and, where cuBLAS loads from LIBCUBLAS, the
 * rate of an 8192^3 cublasGemmEx on pseudo-random data for each dtype
 * and policy a case may have: f32 strict (CUBLAS_COMPUTE_32F_PEDANTIC),
 * f32 tf32 (CUBLAS_COMPUTE_32F_FAST_TF32), f16 and bf16 (CUBLAS_COMPUTE_32F).
 * Each is timed between two events on the default stream: a calibration
 * run sets the repetitions to fill about 20 ms, then the best of five,
 * and the slowest of them beside it (the ceiling's spread, from which
 * its floor's slack follows: internal/floors.GPUSlack).
 * One JSON object on stdout; a driver error exits 2, a cuBLAS that does
 * not load or fails is "gemm_error" with no rates. */

typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

enum { CEIL_TRIALS = 5 };
static const double ceil_target_ms = 20;

/* ceil_time runs op(arg) reps times between two events, CEIL_TRIALS times
 * after a calibration run that sets reps; the best span in ms, the
 * slowest in *worst. The first error op returns ends it, in *rc (a driver
 * error of the events dies). */
static double ceil_time(CUresult (*op)(void *), void *arg, unsigned *reps, double *worst, CUresult *rc)
{
	double best = 1e30;
	*worst = 0;
	*reps = 1;
	*rc = 0;
	for (int t = -1; t < CEIL_TRIALS && *rc == 0; t++) {
		cu_must(cu.EventRecord(gpu.ev0, 0), "cuEventRecord");
		for (unsigned r = 0; r < *reps && *rc == 0; r++)
			*rc = op(arg);
		cu_must(cu.EventRecord(gpu.ev1, 0), "cuEventRecord");
		cu_must(cu.EventSynchronize(gpu.ev1), "cuEventSynchronize");
		float ms = 0;
		cu_must(cu.EventElapsedTime(&ms, gpu.ev0, gpu.ev1), "cuEventElapsedTime");
		if (t < 0) {
			double r = ceil_target_ms / (ms > 0 ? ms : 1e-3);
			*reps = r < 1 ? 1 : r > 100000 ? 100000 : (unsigned)r;
			continue;
		}
		best = ms < best ? ms : best;
		*worst = ms > *worst ? ms : *worst;
	}
	return best;
}

static struct {
	CUdeviceptr src, dst;
	size_t bytes;
} ceil_copy;

static CUresult ceil_copy_op(void *arg)
{
	(void)arg;
	return cu.MemcpyDtoDAsync(ceil_copy.dst, ceil_copy.src, ceil_copy.bytes, 0);
}

static struct {
	cublasStatus_t (*Create)(cublasHandle_t *);
	cublasStatus_t (*GemmEx)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int,
				 const void *, int, int, const void *, void *, int, int, int, int);
	cublasHandle_t h;
	int n, type, compute;
	CUdeviceptr a, b, c;
} cb;

enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

static CUresult ceil_gemm_op(void *arg)
{
	(void)arg;
	const float one = 1, zero = 0;
	cublasStatus_t st = cb.GemmEx(cb.h, 0, 0, cb.n, cb.n, cb.n, &one, (const void *)(uintptr_t)cb.a, cb.type, cb.n,
				      (const void *)(uintptr_t)cb.b, cb.type, cb.n, &zero, (void *)(uintptr_t)cb.c, cb.type,
				      cb.n, cb.compute, -1 /* CUBLAS_GEMM_DEFAULT */);
	if (st != 0) {
		entry_rc = st;
		return ENTRY_FAILED;
	}
	return 0;
}

/* ceil_fill uploads n elements of size esz of pseudo-random values in
 * about [-2, 2] (never zero: zeros run faster) to d. */
static void ceil_fill(CUdeviceptr d, size_t n, int type)
{
	size_t esz = type == CUDA_R_32F ? 4 : 2;
	unsigned char *h = xmalloc(n * esz);
	uint64_t x = 0x9E3779B97F4A7C15u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned sign = (unsigned)(x >> 63), m = (unsigned)(x >> 32);
		if (type == CUDA_R_32F) {
			uint32_t v = sign << 31 | (uint32_t)(126 + (m & 1)) << 23 | ((uint32_t)x & 0x7FFFFF);
			memcpy(h + 4 * i, &v, 4);
		} else {
			uint16_t v = type == CUDA_R_16BF ? (uint16_t)(sign << 15 | (126 + (m & 1)) << 7 | (m >> 9 & 0x7F))
							 : (uint16_t)(sign << 15 | (14 + (m & 1)) << 10 | (m >> 9 & 0x3FF));
			memcpy(h + 2 * i, &v, 2);
		}
	}
	cu_must(cu.MemcpyHtoD(d, h, n * esz), "upload a ceiling's matrix");
	free(h);
}

static int run_ceilings(int argc, char **argv)
{
	if (argc > 1)
		die("usage: cuda-timer --ceilings [LIBCUBLAS]");
	gpu_context();
	CUdevice dev;
	cu_must(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	char name[256] = "";
	cu_must(cu.DeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
	int l2 = 0;
	cu_must(cu.DeviceGetAttribute(&l2, 38 /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE */, dev), "cuDeviceGetAttribute");

	ceil_copy.bytes = (size_t)1 << 30;
	cu_must(cu.MemAlloc(&ceil_copy.src, ceil_copy.bytes), "cuMemAlloc (copy source)");
	cu_must(cu.MemAlloc(&ceil_copy.dst, ceil_copy.bytes), "cuMemAlloc (copy destination)");
	cu_must(cu.MemsetD32(ceil_copy.src, 0x3F800000u, ceil_copy.bytes / 4), "cuMemsetD32");
	unsigned reps;
	CUresult rc;
	double worst;
	double ms = ceil_time(ceil_copy_op, 0, &reps, &worst, &rc);
	cu_must(rc, "cuMemcpyDtoDAsync");
	printf("{\"device\": ");
	json_str(name);
	printf(", \"l2_bytes\": %d, \"copy_bytes\": %zu, \"copy_reps\": %u, \"copy_ns\": %.0f, \"copy_worst_ns\": %.0f, \"copy_bandwidth\": %.6e",
	       l2, 2 * ceil_copy.bytes, reps, ms * 1e6, worst * 1e6, 2.0 * (double)ceil_copy.bytes * reps / (ms * 1e-3));

	char err[512] = "";
	void *lib = argc == 1 ? dlopen(argv[0], RTLD_NOW | RTLD_LOCAL) : NULL;
	if (argc == 0)
		snprintf(err, sizeof err, "no cuBLAS library given: no compute ceilings");
	else if (!lib)
		snprintf(err, sizeof err, "dlopen %s: %s", argv[0], dlerror());
	else {
		cb.Create = dlsym(lib, "cublasCreate_v2");
		cb.GemmEx = dlsym(lib, "cublasGemmEx");
		if (!cb.Create || !cb.GemmEx)
			snprintf(err, sizeof err, "%s: no cublasCreate_v2 or cublasGemmEx", argv[0]);
		else if (cb.Create(&cb.h) != 0)
			snprintf(err, sizeof err, "cublasCreate_v2 failed");
	}
	printf(", \"gemm\": [");
	static const struct {
		const char *dtype, *policy;
		int type, compute;
	} kinds[] = {
		{"f32", "strict", CUDA_R_32F, 69 /* CUBLAS_COMPUTE_32F_PEDANTIC */},
		{"f32", "tf32", CUDA_R_32F, 77 /* CUBLAS_COMPUTE_32F_FAST_TF32 */},
		{"f16", "", CUDA_R_16F, 68 /* CUBLAS_COMPUTE_32F */},
		{"bf16", "", CUDA_R_16BF, 68},
	};
	if (!*err) {
		cb.n = 8192;
		size_t n2 = (size_t)cb.n * cb.n;
		cu_must(cu.MemAlloc(&cb.a, 4 * n2), "cuMemAlloc (A)");
		cu_must(cu.MemAlloc(&cb.b, 4 * n2), "cuMemAlloc (B)");
		cu_must(cu.MemAlloc(&cb.c, 4 * n2), "cuMemAlloc (C)");
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !*err; k++) {
			if (k == 0 || kinds[k].type != cb.type) { /* f32 strict and tf32 share their data */
				ceil_fill(cb.a, n2, kinds[k].type);
				ceil_fill(cb.b, n2, kinds[k].type);
			}
			cb.type = kinds[k].type;
			cb.compute = kinds[k].compute;
			/* One untimed call first: cuBLAS loads its kernels lazily. */
			CUresult rc0 = ceil_gemm_op(0);
			if (rc0 == 0)
				rc0 = cu.CtxSynchronize();
			if (rc0 != 0) {
				snprintf(err, sizeof err, "cublasGemmEx %s %s: %s", kinds[k].dtype, kinds[k].policy,
					 rc0 == ENTRY_FAILED ? "failed" : cu_error(rc0, "cuCtxSynchronize"));
				break;
			}
			double best = ceil_time(ceil_gemm_op, 0, &reps, &worst, &rc);
			if (rc != 0) {
				snprintf(err, sizeof err, "cublasGemmEx %s %s: status %d", kinds[k].dtype, kinds[k].policy, entry_rc);
				break;
			}
			double flops = 2.0 * cb.n * (double)cb.n * cb.n * reps / (best * 1e-3);
			printf("%s{\"dtype\": \"%s\", \"policy\": \"%s\", \"n\": %d, \"reps\": %u, \"ns\": %.0f, \"worst_ns\": %.0f, \"flops\": %.6e}",
			       k ? ", " : "", kinds[k].dtype, kinds[k].policy, cb.n, reps, best * 1e6, worst * 1e6, flops);
		}
	}
	printf("], \"gemm_error\": ");
	json_str(err);
	printf("}\n");
	if (fflush(stdout) != 0 || ferror(stdout))
		die("write ceilings: %s", strerror(errno));
	return 0;
}

/* --health: a fresh process makes a context, writes 1 MiB on the device,
 * reads it back and compares: what replay runs after a visit's CUDA error
 * (which may leave the device unusable) before the next GPU visit. Prints
 * "ok" and exits 0, or dies (exit 2) naming the failing call. */
static int run_health(void)
{
	gpu_context();
	enum { WORDS = 1 << 18 };
	CUdeviceptr d;
	cu_must(cu.MemAlloc(&d, 4 * WORDS), "cuMemAlloc");
	cu_must(cu.MemsetD32(d, 0x7E57AB1Eu, WORDS), "cuMemsetD32");
	cu_must(cu.CtxSynchronize(), "cuCtxSynchronize");
	uint32_t *h = xmalloc(4 * WORDS);
	cu_must(cu.MemcpyDtoH(h, d, 4 * WORDS), "cuMemcpyDtoH");
	for (size_t i = 0; i < WORDS; i++)
		if (h[i] != 0x7E57AB1Eu)
			die("health: word %zu reads 0x%08x after a memset of 0x7e57ab1e", i, h[i]);
	printf("ok\n");
	return 0;
}

/* --telemetry: replay's monitor of the GPU (docs/gpu.md, "Telemetry";
 * docs/gpu-clock.md, "The stager"), which replay runs in a process of its
 * own outside every visit, so no route code shares its address space. It
 * finds the device the timers use (CUDA's device 0, after
 * CUDA_VISIBLE_DEVICES) by PCI bus id, writes one line describing it,
 * then answers replay's requests, one line each. Requests come on fd 0
 * and answers go to fd 1; both are replay's end of one Unix stream socket,
 * on which a request or an answer may carry descriptors (SCM_RIGHTS):
 *
 *   r        one reading:
 *            {"sm_mhz":N,"mem_mhz":N,"temp_c":N,"power_mw":N,"reasons":N,
 *             "procs":N,"power_violation_ns":N,"thermal_violation_ns":N,
 *             "idle_ns":N,"idle_wait_ns":N}
 *   open SETS GAP NAME ROLE BYTES [NAME ROLE BYTES]...
 *            with one descriptor per file: a visit's fresh-pool memory
 *            files (pool fresh SETS GAP), in param order; mapped here until
 *            close. {"opened": BYTES}: the staged allocation's size
 *            (stage_layout).
 *   stage SEQ N FLUSH
 *            one fresh allocation (cuMemCreate, exportable as a POSIX
 *            descriptor) holding every file, sets 0 to N-1 uploaded (gaps
 *            and canaries included), under FLUSH 1 a buffer of twice the
 *            L2 written after the upload, the device synchronised.
 *            {"staged": SEQ, "bytes": B, "upload_ns": U}, carrying the
 *            allocation's descriptor, which replay hands the visit.
 *   unstage SEQ
 *            first the idle probe, answered at once: {"probed": SEQ,
 *            "idle_ns": N, "idle_wait_ns": W} (replay's span of the
 *            sample ends with this answer); then every file's range comes
 *            down: an input's bytes must be what replay wrote, an output's
 *            gaps the canaries; the outputs (gaps restored) go into the
 *            memory files, the allocation is released, and {"unstaged":
 *            SEQ, "reason": R} names the first violation ("" for none).
 *   close    releases the files and any staged allocation: {"closed": N},
 *            N the files it held.
 *
 * A reading: reasons is the clock-event (throttle) mask; procs the
 * processes with a compute context on the device other than this
 * monitor's own; the violation times are NVML's running totals. idle_ns
 * is the idle probe: the monitor holds a context of its own with an empty
 * kernel (PTX, JIT compiled by the driver: no compiler at prepare), and
 * times one launch of it to its synchronisation on the host clock. The
 * GPU runs one process's context at a time: with another process's
 * kernel running, the launch waits for it or for its time slice (on the
 * H200 about 2.4 ms, against under 60 us idle and under 300 us just after
 * another context ran: docs/results/2026-12-04-gpu-clock-probe), so
 * replay sees GPU work of a visit that runs outside its samples. Each
 * probe runs under SCHED_FIFO where the monitor may use it (the first
 * line's "sched" says whether), and idle_wait_ns is the time the probe's
 * thread waited for a CPU meanwhile (the run delay of
 * /proc/thread-self/schedstat; -1 where it cannot be read): a probe made
 * slow by the host's CPUs rather than the GPU says so. A reading the
 * device does not support is -1; any other NVML or driver error, and any
 * request out of order, ends the process (exit 2) naming it. */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	unsigned long long referenceTime, violationTime;
} nvmlViolationTime_t;

enum { NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

static struct {
	nvmlReturn_t (*Init)(void);
	const char *(*ErrorString)(nvmlReturn_t);
	nvmlReturn_t (*GetHandleByPciBusId)(const char *, nvmlDevice_t *);
	nvmlReturn_t (*GetName)(nvmlDevice_t, char *, unsigned);
	nvmlReturn_t (*DriverVersion)(char *, unsigned);
	nvmlReturn_t (*ClockInfo)(nvmlDevice_t, int, unsigned *);
	nvmlReturn_t (*Temperature)(nvmlDevice_t, int, unsigned *);
	nvmlReturn_t (*PowerUsage)(nvmlDevice_t, unsigned *);
	nvmlReturn_t (*Reasons)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*Procs)(nvmlDevice_t, unsigned *, void *);
	nvmlReturn_t (*Violation)(nvmlDevice_t, int, nvmlViolationTime_t *);
} nvml;

static void *nvml_sym(void *lib, const char *a, const char *b)
{
	void *p = dlsym(lib, a);
	if (!p && b)
		p = dlsym(lib, b);
	if (!p)
		die("libnvidia-ml.so.1: no %s", a);
	return p;
}

/* nvml_value is one reading: the value, -1 where the device does not
 * support it. */
static long long nvml_value(nvmlReturn_t rc, long long v, const char *what)
{
	if (rc == NVML_ERROR_NOT_SUPPORTED)
		return -1;
	if (rc != 0)
		die("nvml: %s: %s", what, nvml.ErrorString(rc));
	return v;
}

/* answer writes one line to fd 1, carrying fd where it is not -1. */
static void answer(const char *line, int fd)
{
	size_t n = strlen(line);
	char *b = xmalloc(n + 1);
	memcpy(b, line, n);
	b[n++] = '\n';
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec io = {.iov_base = b, .iov_len = n};
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&ctl, 0, sizeof ctl);
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof ctl.b;
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof fd);
	}
	size_t off = 0;
	while (off < n) {
		io.iov_base = b + off;
		io.iov_len = n - off;
		ssize_t w = sendmsg(1, &m, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK && fd < 0)
			w = write(1, b + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write an answer on fd 1: %s", w < 0 ? strerror(errno) : "nothing written");
		off += (size_t)w;
		m.msg_control = NULL; /* the descriptor went with the first bytes */
		m.msg_controllen = 0;
	}
	free(b);
}

/* The idle probe: the monitor's context, empty kernel and stream. */
static struct {
	CUfunction fn;
	CUstream s;
	int fifo;      /* the monitor may use SCHED_FIFO: each probe runs under it */
	int schedstat; /* /proc/thread-self/schedstat, or -1 */
} probe;

/* run_delay is the monitor's thread's time spent waiting for a CPU so far
 * (ns), or -1. */
static long long run_delay(void)
{
	char b[128];
	if (probe.schedstat < 0)
		return -1;
	ssize_t n = pread(probe.schedstat, b, sizeof b - 1, 0);
	if (n <= 0)
		return -1;
	b[n] = 0;
	unsigned long long run, wait;
	if (sscanf(b, "%llu %llu", &run, &wait) != 2)
		return -1;
	return (long long)wait;
}

/* idle_probe times one launch of the empty kernel to its synchronisation
 * (ns), and the CPU wait meanwhile in *wait (-1: unknown). */
static long long idle_probe(long long *wait)
{
	struct sched_param fifo = {.sched_priority = 1}, other = {.sched_priority = 0};
	long long d0 = run_delay();
	if (probe.fifo)
		sched_setscheduler(0, SCHED_FIFO, &fifo);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cu_must(cu.LaunchKernel(probe.fn, 1, 1, 1, 32, 1, 1, 0, probe.s, 0, 0), "cuLaunchKernel (the idle probe)");
	cu_must(cu.CtxSynchronize(), "cuCtxSynchronize (the idle probe)");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (probe.fifo)
		sched_setscheduler(0, SCHED_OTHER, &other);
	long long d1 = run_delay();
	*wait = d0 < 0 || d1 < 0 ? -1 : d1 - d0;
	return (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
}

/* The stager's state: the open visit's fresh-pool files and the staged
 * allocation, if any. */
static struct {
	int open, staged;
	CUdevice dev;
	struct pool pool;
	size_t nfiles;
	struct {
		char name[MAX_NAME + 1];
		int input;
		size_t bytes, size, off;
		unsigned char *map;
	} f[MAX_PARAMS];
	size_t bytes;            /* the allocation's size */
	CUdeviceptr range;       /* where the monitor maps each allocation */
	unsigned char *scratch;  /* as large as the largest file */
	CUmemGenericAllocationHandle h;
	uint64_t seq, n, index;  /* the staged sample's SEQ and calls; its index since open */
	CUdeviceptr flush;       /* FLUSH 1: twice the L2, made on first use */
	size_t flush_words;
	unsigned flushes;
} st;

/* stage_end is where set n-1's data of file i ends: what a sample of n
 * calls uploads and checks. */
static size_t stage_end(size_t i, uint64_t n)
{
	return set_offset(st.f[i].bytes, &st.pool, n - 1) + st.f[i].bytes;
}

static void stage_open(char **tok, size_t ntok, struct commands *in)
{
	if (st.open)
		die("open: the monitor has a visit's files open already");
	if (ntok < 6 || (ntok - 3) % 3 != 0)
		die("open: want \"open SETS GAP NAME ROLE BYTES...\", got %zu fields", ntok);
	st.nfiles = (ntok - 3) / 3;
	if (st.nfiles > MAX_PARAMS)
		die("open: %zu files, at most %d", st.nfiles, MAX_PARAMS);
	if ((size_t)in->nfds != st.nfiles || in->lost)
		die("open: %zu files, %d descriptors", st.nfiles, in->nfds + in->lost);
	if (!parse_u64(tok[1], MAX_SETS, &st.pool.sets) || st.pool.sets < 1)
		die("open: sets \"%s\"", tok[1]);
	if (!parse_u64(tok[2], 1 << 20, &st.pool.gap) || st.pool.gap == 0 || st.pool.gap % ALIGN != 0)
		die("open: gap \"%s\", want a positive multiple of %d", tok[2], ALIGN);
	size_t sizes[MAX_PARAMS], largest = 0;
	for (size_t i = 0; i < st.nfiles; i++) {
		char **t = tok + 3 + 3 * i;
		uint64_t bytes;
		if (!valid_name(t[0]))
			die("open: bad name \"%s\"", t[0]);
		if (strcmp(t[1], "input") != 0 && strcmp(t[1], "output") != 0)
			die("open: %s: role \"%s\", want input or output", t[0], t[1]);
		if (!parse_u64(t[2], MAX_BYTES, &bytes) || bytes == 0)
			die("open: %s: bytes \"%s\"", t[0], t[2]);
		strcpy(st.f[i].name, t[0]);
		st.f[i].input = t[1][0] == 'i';
		st.f[i].bytes = (size_t)bytes;
		st.f[i].size = align_up(set_offset(st.f[i].bytes, &st.pool, st.pool.sets), PAGE);
		int fd = in->fds[i];
		struct stat sb;
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != st.f[i].size)
			die("open: %s: not a memory file of %zu bytes", t[0], st.f[i].size);
		int prot = st.f[i].input ? PROT_READ : PROT_READ | PROT_WRITE;
		st.f[i].map = mmap(NULL, st.f[i].size, prot, MAP_SHARED, fd, 0);
		if (st.f[i].map == MAP_FAILED)
			die("open: %s: map: %s", t[0], strerror(errno));
		close(fd);
		sizes[i] = st.f[i].size;
		largest = sizes[i] > largest ? sizes[i] : largest;
	}
	in->nfds = 0;
	size_t off[MAX_PARAMS];
	st.bytes = stage_layout(st.dev, sizes, st.nfiles, off);
	for (size_t i = 0; i < st.nfiles; i++)
		st.f[i].off = off[i];
	cu_must(cu.MemAddressReserve(&st.range, st.bytes, 0, 0, 0), "cuMemAddressReserve (the stager's range)");
	st.scratch = xmalloc(largest);
	st.open = 1;
	st.index = 0;
	char line[64];
	snprintf(line, sizeof line, "{\"opened\": %zu}", st.bytes);
	answer(line, -1);
}

static void stage(char **tok, size_t ntok)
{
	uint64_t seq, n, flush;
	if (ntok != 4 || !parse_u64(tok[1], UINT64_C(1) << 62, &seq) || !parse_u64(tok[2], MAX_SETS, &n) ||
	    !parse_u64(tok[3], 1, &flush))
		die("stage: want \"stage SEQ N FLUSH\"");
	if (!st.open || st.staged)
		die("stage %" PRIu64 ": %s", seq, st.open ? "a sample is staged already" : "no files open");
	if (n < 1 || n > st.pool.sets)
		die("stage %" PRIu64 ": %" PRIu64 " calls, want 1 to %" PRIu64 " (the fresh sets)", seq, n, st.pool.sets);
	int64_t t0 = mono_ns();
	CUmemAllocationProp p = stage_prop(st.dev);
	cu_must(cu.MemCreate(&st.h, st.bytes, &p, 0), "cuMemCreate (a novel sample's slots)");
	cu_must(cu.MemMap(st.range, st.bytes, 0, st.h, 0), "cuMemMap (a novel sample's slots)");
	CUmemAccessDesc a = {{1, st.dev}, 3};
	cu_must(cu.MemSetAccess(st.range, st.bytes, &a, 1), "cuMemSetAccess (a novel sample's slots)");
	for (size_t i = 0; i < st.nfiles; i++)
		cu_must(cu.MemcpyHtoD(st.range + st.f[i].off, st.f[i].map, stage_end(i, n)), "upload a novel sample's slots");
	if (flush) {
		if (!st.flush) {
			int l2 = 0;
			cu_must(cu.DeviceGetAttribute(&l2, 38 /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE */, st.dev), "cuDeviceGetAttribute");
			if (l2 <= 0)
				die("l2 flush: the device reports an L2 of %d bytes", l2);
			st.flush_words = (2 * (size_t)l2 + 3) / 4;
			cu_must(cu.MemAlloc(&st.flush, st.flush_words * 4), "cuMemAlloc (the L2 flush buffer)");
		}
		cu_must(cu.MemsetD32(st.flush, 0x9E3779B9u + ++st.flushes, st.flush_words), "cuMemsetD32 (the L2 flush)");
	}
	cu_must(cu.CtxSynchronize(), "cuCtxSynchronize (a novel sample's upload)");
	int fd = -1;
	cu_must(cu.MemExport(&fd, st.h, CU_HANDLE_POSIX_FD, 0), "cuMemExportToShareableHandle (a novel sample's slots)");
	st.staged = 1;
	st.seq = seq;
	st.n = n;
	char line[160];
	snprintf(line, sizeof line, "{\"staged\": %" PRIu64 ", \"bytes\": %zu, \"upload_ns\": %" PRId64 "}", seq, st.bytes,
		 mono_ns() - t0);
	answer(line, fd);
	close(fd);
}

/* stage_release unmaps and releases the staged allocation. */
static void stage_release(void)
{
	if (!st.staged)
		return;
	cu_must(cu.MemUnmap(st.range, st.bytes), "cuMemUnmap (a novel sample's slots)");
	cu_must(cu.MemRelease(st.h), "cuMemRelease (a novel sample's slots)");
	st.staged = 0;
	st.index++;
}

static void unstage(char **tok, size_t ntok)
{
	uint64_t seq;
	if (ntok != 2 || !parse_u64(tok[1], UINT64_C(1) << 62, &seq))
		die("unstage: want \"unstage SEQ\"");
	if (!st.staged || seq != st.seq)
		die("unstage %" PRIu64 ": %s", seq, st.staged ? "another sample is staged" : "nothing is staged");
	long long wait, idle = idle_probe(&wait);
	char line[640];
	snprintf(line, sizeof line, "{\"probed\": %" PRIu64 ", \"idle_ns\": %lld, \"idle_wait_ns\": %lld}", seq, idle, wait);
	answer(line, -1);
	char reason[512] = "";
	for (size_t i = 0; i < st.nfiles; i++) {
		size_t end = stage_end(i, st.n);
		unsigned char *d = st.scratch, *map = st.f[i].map;
		cu_must(cu.MemcpyDtoH(d, st.range + st.f[i].off, end), "download a novel sample's slots");
		if (st.f[i].input) {
			size_t o = first_diff(d, map, end);
			if (o < end && !*reason)
				snprintf(reason, sizeof reason, "input_written: %s fresh byte %zu (device) (novel sample %" PRIu64 ")",
					 st.f[i].name, o, st.index);
			continue;
		}
		size_t o = 0;
		for (uint64_t s = 0; s < st.n; s++) {
			size_t start = set_offset(st.f[i].bytes, &st.pool, s);
			for (; o < start; o++)
				if (d[o] != canary(o)) {
					if (!*reason)
						snprintf(reason, sizeof reason,
							 "guard_overwritten: %s fresh byte %zu (device) (novel sample %" PRIu64 ")",
							 st.f[i].name, o, st.index);
					d[o] = canary(o);
				}
			o = start + st.f[i].bytes;
		}
		memcpy(map, d, end); /* the outputs, for replay; the gaps hold the canaries the file holds */
	}
	stage_release();
	/* The reason is ASCII of names (identifiers) and words: no byte to escape. */
	for (const char *c = reason; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
			die("unstage: a reason with byte 0x%02x", (unsigned char)*c);
	snprintf(line, sizeof line, "{\"unstaged\": %" PRIu64 ", \"reason\": \"%s\"}", seq, reason);
	answer(line, -1);
}

static void stage_close(void)
{
	size_t n = st.open ? st.nfiles : 0;
	stage_release();
	if (st.open) {
		for (size_t i = 0; i < st.nfiles; i++)
			munmap(st.f[i].map, st.f[i].size);
		cu_must(cu.MemAddressFree(st.range, st.bytes), "cuMemAddressFree (the stager's range)");
		free(st.scratch);
		st.scratch = NULL;
		st.open = 0;
	}
	char line[64];
	snprintf(line, sizeof line, "{\"closed\": %zu}", n);
	answer(line, -1);
}

static int run_telemetry(void)
{
	cu_load();
	cu_must(cu.Init(0), "cuInit");
	CUdevice dev;
	char bus[64];
	cu_must(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	cu_must(cu.DeviceGetPCIBusId(bus, sizeof bus, dev), "cuDeviceGetPCIBusId");
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		die("dlopen libnvidia-ml.so.1: %s", dlerror());
	nvml.Init = nvml_sym(lib, "nvmlInit_v2", 0);
	nvml.ErrorString = nvml_sym(lib, "nvmlErrorString", 0);
	nvml.GetHandleByPciBusId = nvml_sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", 0);
	nvml.GetName = nvml_sym(lib, "nvmlDeviceGetName", 0);
	nvml.DriverVersion = nvml_sym(lib, "nvmlSystemGetDriverVersion", 0);
	nvml.ClockInfo = nvml_sym(lib, "nvmlDeviceGetClockInfo", 0);
	nvml.Temperature = nvml_sym(lib, "nvmlDeviceGetTemperature", 0);
	nvml.PowerUsage = nvml_sym(lib, "nvmlDeviceGetPowerUsage", 0);
	nvml.Reasons = nvml_sym(lib, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
	nvml.Procs = nvml_sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
	nvml.Violation = nvml_sym(lib, "nvmlDeviceGetViolationStatus", 0);
	nvmlReturn_t rc = nvml.Init();
	if (rc != 0)
		die("nvml: nvmlInit: %d", rc);
	nvmlDevice_t d;
	if ((rc = nvml.GetHandleByPciBusId(bus, &d)) != 0)
		die("nvml: no device at PCI bus id %s: %s", bus, nvml.ErrorString(rc));
	char name[96], driver[96];
	if ((rc = nvml.GetName(d, name, sizeof name)) != 0)
		die("nvml: nvmlDeviceGetName: %s", nvml.ErrorString(rc));
	if ((rc = nvml.DriverVersion(driver, sizeof driver)) != 0)
		die("nvml: nvmlSystemGetDriverVersion: %s", nvml.ErrorString(rc));
	/* The idle probe's context, kernel and stream: made before the first
	 * line, so a monitor that cannot probe does not start. */
	static const char probe_ptx[] = ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry tilepipe_idle() { ret; }\n";
	CUcontext pctx;
	CUmodule pmod;
	cu_must(cu.PrimaryCtxRetain(&pctx, dev), "cuDevicePrimaryCtxRetain");
	cu_must(cu.CtxSetCurrent(pctx), "cuCtxSetCurrent");
	cu_must(cu.ModuleLoadData(&pmod, probe_ptx), "cuModuleLoadData (the idle probe's PTX)");
	cu_must(cu.ModuleGetFunction(&probe.fn, pmod, "tilepipe_idle"), "cuModuleGetFunction");
	cu_must(cu.StreamCreate(&probe.s, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
	st.dev = dev;
	probe.schedstat = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	/* Each probe runs under SCHED_FIFO where the monitor may use it, so a
	 * visit's threads spinning on every core do not delay it. */
	char sched[160] = "fifo";
	struct sched_param fifo = {.sched_priority = 1}, other = {.sched_priority = 0};
	if (sched_setscheduler(0, SCHED_FIFO, &fifo) == 0) {
		probe.fifo = 1;
		sched_setscheduler(0, SCHED_OTHER, &other);
	} else
		snprintf(sched, sizeof sched, "other (sched_setscheduler SCHED_FIFO: %s)", strerror(errno));
	for (const char *const *f = (const char *const[]){name, bus, driver, NULL}; *f; f++)
		for (const char *c = *f; *c; c++)
			if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
				die("nvml: a device name, bus id or driver version with byte 0x%02x", (unsigned char)*c);
	char first[512];
	snprintf(first, sizeof first, "{\"telemetry\": \"nvml\", \"device\": \"%s\", \"bus\": \"%s\", \"driver\": \"%s\", \"sched\": \"%s\"}",
		 name, bus, driver, sched);
	answer(first, -1);
	/* Room for far more processes than a device holds; each entry of the
	 * v2/v3 process table is 24 bytes, the slot is twice that. */
	enum { MAX_PROCS = 1024 };
	static unsigned char procs[MAX_PROCS * 48];
	static struct commands in = {.fd = 0, .max = MAX_REQUEST};
	static char req[MAX_REQUEST + 2];
	while (next_command(&in, req)) {
		char *tok[3 + 3 * MAX_PARAMS + 1], *save = NULL;
		size_t ntok = 0;
		for (char *t = strtok_r(req, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			if (ntok == sizeof tok / sizeof tok[0])
				die("request: more than %zu fields", ntok);
			tok[ntok++] = t;
		}
		if (ntok == 0)
			die("request: an empty line");
		if (strcmp(tok[0], "open") == 0) {
			stage_open(tok, ntok, &in);
			continue;
		}
		command_fds(&in, tok[0], 0);
		if (strcmp(tok[0], "stage") == 0) {
			stage(tok, ntok);
			continue;
		}
		if (strcmp(tok[0], "unstage") == 0) {
			unstage(tok, ntok);
			continue;
		}
		if (strcmp(tok[0], "close") == 0 && ntok == 1) {
			stage_close();
			continue;
		}
		if (strcmp(tok[0], "r") != 0 || ntok != 1)
			die("request \"%s\": want r, open, stage, unstage or close", tok[0]);
		unsigned sm = 0, mem = 0, temp = 0, power = 0, n = MAX_PROCS;
		unsigned long long reasons = 0;
		nvmlViolationTime_t pv = {0, 0}, tv = {0, 0};
		long long v[8];
		/* Each call before its value is read: C leaves the order of a
		 * function's arguments open. */
		rc = nvml.ClockInfo(d, 1 /* NVML_CLOCK_SM */, &sm);
		v[0] = nvml_value(rc, sm, "nvmlDeviceGetClockInfo (SM)");
		rc = nvml.ClockInfo(d, 2 /* NVML_CLOCK_MEM */, &mem);
		v[1] = nvml_value(rc, mem, "nvmlDeviceGetClockInfo (memory)");
		rc = nvml.Temperature(d, 0 /* NVML_TEMPERATURE_GPU */, &temp);
		v[2] = nvml_value(rc, temp, "nvmlDeviceGetTemperature");
		rc = nvml.PowerUsage(d, &power);
		v[3] = nvml_value(rc, power, "nvmlDeviceGetPowerUsage");
		rc = nvml.Reasons(d, &reasons);
		v[4] = nvml_value(rc, (long long)reasons, "nvmlDeviceGetCurrentClocksEventReasons");
		rc = nvml.Procs(d, &n, procs);
		v[5] = nvml_value(rc, n, "nvmlDeviceGetComputeRunningProcesses");
		rc = nvml.Violation(d, 0 /* NVML_PERF_POLICY_POWER */, &pv);
		v[6] = nvml_value(rc, (long long)pv.violationTime, "nvmlDeviceGetViolationStatus (power)");
		rc = nvml.Violation(d, 1 /* NVML_PERF_POLICY_THERMAL */, &tv);
		v[7] = nvml_value(rc, (long long)tv.violationTime, "nvmlDeviceGetViolationStatus (thermal)");
		if (v[5] > 0)
			v[5]--; /* this monitor's own context */
		long long wait, idle = idle_probe(&wait);
		char line[512];
		snprintf(line, sizeof line,
			 "{\"sm_mhz\": %lld, \"mem_mhz\": %lld, \"temp_c\": %lld, \"power_mw\": %lld, \"reasons\": %lld, "
			 "\"procs\": %lld, \"power_violation_ns\": %lld, \"thermal_violation_ns\": %lld, \"idle_ns\": %lld, \"idle_wait_ns\": %lld}",
			 v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], idle, wait);
		answer(line, -1);
	}
	return 0;
}
