//go:build ignore

/* The line above keeps the go tool from treating this file as cgo source of
 * package harness, which embeds it as harness.Source. */

/*
 * harness.c: tilepipe's timer for object routes (docs/protocol.md, "visit"
 * and "closure"). Prepare compiles it once and links it, unchanged, with a
 * route's captured objects, which define
 *
 *     int tilepipe_entry(void *const *buffers);
 *
 * Usage:
 *     harness --visit VISIT.txt   validate, then serve replay's commands on
 *                                 fd 3 and report on fd 4 (protocol 3)
 *     harness --closure           print every regular file mapped into us
 *
 * Replay owns the clock and the call counts: it says how many calls each
 * sample makes and measures every span itself; the numbers this timer
 * reports are only its cross-check. Exit 0 means the reports were written
 * (status ok or failed); exit 2 is a usage, parse or I/O error, explained on
 * stderr as "harness: error: ...". Any other exit (a signal from the entry,
 * a timeout) is the visit's failure, recorded by replay. The timer ends with
 * _exit, so no exit handler or destructor of route code ever runs.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <sys/types.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#ifndef TILEPIPE_CUDA
int tilepipe_entry(void *const *buffers);

/*
 * Every call goes through this pointer. Reading it is a volatile access, so
 * the compiler cannot see which function is called and must make each call,
 * even if a future build links the entry with LTO.
 */
static int (*volatile entry_fn)(void *const *) = tilepipe_entry;
#else
/* The CUDA timer runs a cubin (visit keys cubin and launch) or an object
 * route's entry on device buffers, which the link may leave undefined (a
 * cubin timer links no route object). */
static const char *cubin_path, *launch_path;
/* l2_flush: the visit's "l2 flush" (replay --l2 flush): a buffer of twice
 * the L2 is written before every sample, outside its span; 0 is "l2 warm". */
static int l2_flush = -1;
/* graph_batch: the visit's "graph N" (replay --graph-batch N): the CUDA
 * graph the "graph" command replays holds N calls; 0: no graph samples. */
static uint64_t graph_batch;
int tilepipe_entry(void *const *device_buffers, void *stream) __attribute__((weak));
static int (*volatile cuda_entry)(void *const *, void *) = tilepipe_entry;
#endif

/* Return codes of warm-up and timed calls, OR-ed, checked after timing. */
static volatile int timed_rc;

/* cold_ns: the visit's first call (set 0's first validation call) timed on
 * its own on the monotonic clock, with what came first only to it (on a
 * GPU: the module load, the launch, the synchronisation); -1 until then.
 * It is reported in the validated report and never mixed into a sample. */
static int64_t cold_ns = -1;

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

enum {
	ALIGN = 64,           /* alignment of every set's data start */
	PAGE = 4096,          /* memory files are a multiple of this */
	RESERVE = 1 << 20,    /* inaccessible bytes on each side of a mapping */
	MAX_NAME = 64,        /* longest param name */
	MAX_PARAMS = 64,
};
#define MAX_CALLS_PER_SAMPLE (UINT64_C(1) << 30)
#define MAX_BYTES (UINT64_C(1) << 40)
#define MAX_SETS (UINT64_C(1) << 20)

enum role { ROLE_INPUT, ROLE_OUTPUT };

/* The four checks of the report, in the order the protocol lists them. */
enum check { CHECK_GUARDS, CHECK_POISON, CHECK_INPUTS, CHECK_REPEAT, NCHECKS };
static const char *const check_names[NCHECKS] = {"guards", "poison", "inputs", "repeat"};

/* Storage dtypes and their poison patterns: little-endian bytes of a NaN
 * for the first validation call and another NaN for the second
 * (docs/protocol.md): f32 0x7FC0DEAD / 0x7FC0BEEF, i64 0x7FF8DEADDEADDEAD /
 * 0x7FF8BEEFBEEFBEEF, f16 0x7E5D / 0x7E5E, bf16 0x7FDE / 0x7FBE. */
static const struct dtype {
	const char *name;
	size_t elem;
	unsigned char poison[2][8];
} dtypes[] = {
	{"f32", 4, {{0xAD, 0xDE, 0xC0, 0x7F}, {0xEF, 0xBE, 0xC0, 0x7F}}},
	{"i64", 8, {{0xAD, 0xDE, 0xAD, 0xDE, 0xAD, 0xDE, 0xF8, 0x7F}, {0xEF, 0xBE, 0xEF, 0xBE, 0xEF, 0xBE, 0xF8, 0x7F}}},
	{"f16", 2, {{0x5D, 0x7E}, {0x5E, 0x7E}}},
	{"bf16", 2, {{0xDE, 0x7F}, {0xBE, 0x7F}}},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif

/* The two pools of buffer sets (docs/protocol.md, "Buffer sets"). */
enum pool_id { WARM, FRESH, NPOOLS };
static const char *const pool_names[NPOOLS] = {"warm", "fresh"};

struct pool {
	uint64_t sets, gap;
};

/* One (param, pool) memory file as mapped here. */
struct region {
	int fd;
	size_t size;          /* the file's size */
	unsigned char *map;   /* its mapping, RESERVE inaccessible bytes each side */
	ino_t ino;
	dev_t dev;
};

struct param {
	char *name;
	enum role role;
	size_t elem;  /* element size: 2 (f16, bf16), 4 (f32) or 8 (i64) */
	const unsigned char (*poison)[8]; /* the two poison patterns of the dtype */
	size_t bytes;
	struct region reg[NPOOLS];
	unsigned char *copy; /* output: the first validation call's results, every warm set */
};

/* The protocol's descriptors: commands from replay, reports to replay. */
enum { CMD_FD = 3, REPORT_FD = 4 };

struct visit {
	const char *file;
	uint64_t threads;
	struct pool pools[NPOOLS];
	struct param *params;
	size_t nparams;
	void **sets[NPOOLS]; /* sets[pool][s * nparams + i]: param i's buffer in set s */
};

/* The visit, for the fault handler. */
static struct visit *the_visit;

/* The report's state; reason is empty while everything passes. */
struct report {
	char reason[512];
	const char *checks[NCHECKS];
	int ran[NCHECKS]; /* check passed at least once */
};

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("harness: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory allocating %zu bytes", n);
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc(n);
	memcpy(p, s, n);
	return p;
}

/* ---- VISIT.txt ---- */

/* parse_u64 accepts only plain decimal digits, at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*out = v;
	return 1;
}

/* Names appear in reason strings and JSON, so they are identifiers. */
static int valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MAX_NAME)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* set_offset is where set s of a param of bytes bytes starts in its pool's
 * memory file; set_offset(sets) rounded up to PAGE is the file's size. */
static size_t set_offset(size_t bytes, const struct pool *pl, uint64_t s)
{
	return pl->gap + s * (align_up(bytes, ALIGN) + pl->gap);
}

static void parse_param(struct visit *v, int lineno, char **tok, size_t ntok)
{
	const char *f = v->file;
	if (ntok < 7)
		die("%s:%d: param: want \"param ROLE NAME DTYPE BYTES WARMFD FRESHFD [DIM...]\", got %zu fields", f, lineno,
		    ntok);
	if (v->nparams == MAX_PARAMS)
		die("%s:%d: param: more than %d params", f, lineno, MAX_PARAMS);
	struct param p = {0};
	if (strcmp(tok[1], "input") == 0)
		p.role = ROLE_INPUT;
	else if (strcmp(tok[1], "output") == 0)
		p.role = ROLE_OUTPUT;
	else
		die("%s:%d: param: role \"%s\", want input or output", f, lineno, tok[1]);
	if (!valid_name(tok[2]))
		die("%s:%d: param: bad name \"%s\"", f, lineno, tok[2]);
	for (size_t i = 0; i < v->nparams; i++)
		if (strcmp(v->params[i].name, tok[2]) == 0)
			die("%s:%d: param: duplicate name \"%s\"", f, lineno, tok[2]);
	size_t d = 0;
	while (d < NDTYPES && strcmp(tok[3], dtypes[d].name) != 0)
		d++;
	if (d == NDTYPES)
		die("%s:%d: param %s: dtype \"%s\", want f32, f16, bf16 or i64", f, lineno, tok[2], tok[3]);
	p.elem = dtypes[d].elem;
	p.poison = dtypes[d].poison;
	uint64_t bytes;
	if (!parse_u64(tok[4], MAX_BYTES, &bytes) || bytes == 0)
		die("%s:%d: param %s: bad byte count \"%s\"", f, lineno, tok[2], tok[4]);
	if (bytes % p.elem != 0)
		die("%s:%d: param %s: %" PRIu64 " bytes is not a multiple of %s's %zu", f, lineno, tok[2], bytes,
		    tok[3], p.elem);
	p.bytes = (size_t)bytes;
	for (int k = 0; k < NPOOLS; k++) {
		uint64_t fd;
		if (!parse_u64(tok[5 + k], 1 << 20, &fd) || fd <= REPORT_FD)
			die("%s:%d: param %s: bad %s fd \"%s\", want a descriptor above %d", f, lineno, tok[2],
			    pool_names[k], tok[5 + k], REPORT_FD);
		for (size_t i = 0; i < v->nparams; i++)
			for (int j = 0; j < NPOOLS; j++)
				if (v->params[i].reg[j].fd == (int)fd)
					die("%s:%d: param %s: fd %" PRIu64 " is also %s's", f, lineno, tok[2], fd,
					    v->params[i].name);
		if (k == FRESH && (int)fd == p.reg[WARM].fd)
			die("%s:%d: param %s: fd %" PRIu64 " is both its warm and fresh file", f, lineno, tok[2], fd);
		p.reg[k].fd = (int)fd;
	}
	if (ntok > 7) {
		uint64_t elems = 1;
		for (size_t i = 7; i < ntok; i++) {
			uint64_t d;
			if (!parse_u64(tok[i], MAX_BYTES, &d))
				die("%s:%d: param %s: bad dim \"%s\"", f, lineno, tok[2], tok[i]);
			if (d != 0 && elems > MAX_BYTES / d)
				die("%s:%d: param %s: dims too large", f, lineno, tok[2]);
			elems *= d;
		}
		if (elems * p.elem != bytes)
			die("%s:%d: param %s: dims give %" PRIu64 " bytes, want %" PRIu64, f, lineno, tok[2],
			    elems * p.elem, bytes);
	}
	p.name = xstrdup(tok[2]);
	v->params = realloc(v->params, (v->nparams + 1) * sizeof *v->params);
	if (!v->params)
		die("out of memory");
	v->params[v->nparams++] = p;
}

/* parse_pool reads "pool NAME SETS GAP"; pools come warm, then fresh. */
static void parse_pool(struct visit *v, int lineno, char **tok, size_t ntok, int *npools)
{
	const char *f = v->file;
	if (*npools == NPOOLS || v->nparams > 0)
		die("%s:%d: pool: want exactly the warm and fresh pools, before the params", f, lineno);
	const char *want = pool_names[*npools];
	if (ntok != 4 || strcmp(tok[1], want) != 0)
		die("%s:%d: pool: want \"pool %s SETS GAP\"", f, lineno, want);
	struct pool *pl = &v->pools[*npools];
	uint64_t min = *npools == WARM ? 2 : 1;
	if (!parse_u64(tok[2], MAX_SETS, &pl->sets) || pl->sets < min)
		die("%s:%d: pool %s: sets \"%s\", want an integer in [%" PRIu64 ", %" PRIu64 "]", f, lineno, want, tok[2],
		    min, MAX_SETS);
	if (!parse_u64(tok[3], 1 << 20, &pl->gap) || pl->gap == 0 || pl->gap % ALIGN != 0)
		die("%s:%d: pool %s: gap \"%s\", want a positive multiple of %d", f, lineno, want, tok[3], ALIGN);
	(*npools)++;
}

static const struct {
	const char *key;
	uint64_t min, max;
} scalars[] = {
	{"threads", 1, 1 << 20},
};
enum { NSCALARS = sizeof scalars / sizeof scalars[0] };

static void parse_visit(const char *file, struct visit *v)
{
	FILE *f = fopen(file, "r");
	if (!f)
		die("open %s: %s", file, strerror(errno));
	memset(v, 0, sizeof *v);
	v->file = file;
	uint64_t *vals[NSCALARS] = {&v->threads};
	int seen[NSCALARS] = {0};
	int npools = 0;
	char *line = NULL;
	size_t cap = 0;
	char **tok = NULL;
	size_t tokcap = 0;
	int lineno = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) != -1) {
		lineno++;
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = 0;
		if (strlen(line) != (size_t)n)
			die("%s:%d: NUL byte in line", file, lineno);
		size_t ntok = 0;
		char *save = NULL;
		for (char *t = strtok_r(line, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
			if (ntok == tokcap) {
				tokcap = tokcap ? 2 * tokcap : 16;
				tok = realloc(tok, tokcap * sizeof *tok);
				if (!tok)
					die("out of memory");
			}
			tok[ntok++] = t;
		}
		if (lineno == 1) {
			if (ntok != 2 || strcmp(tok[0], "tilepipe-visit") != 0 || strcmp(tok[1], "3") != 0)
				die("%s:1: bad header, want \"tilepipe-visit 3\"", file);
			continue;
		}
		if (ntok == 0)
			die("%s:%d: empty line", file, lineno);
		if (strcmp(tok[0], "pool") == 0) {
			parse_pool(v, lineno, tok, ntok, &npools);
			continue;
		}
		if (strcmp(tok[0], "param") == 0) {
			if (npools != NPOOLS)
				die("%s:%d: param before the warm and fresh pools", file, lineno);
			parse_param(v, lineno, tok, ntok);
			continue;
		}
#ifdef TILEPIPE_CUDA
		if ((strcmp(tok[0], "cubin") == 0 || strcmp(tok[0], "launch") == 0) && ntok == 2) {
			const char **dst = tok[0][0] == 'c' ? &cubin_path : &launch_path;
			if (*dst)
				die("%s:%d: duplicate key \"%s\"", file, lineno, tok[0]);
			*dst = xstrdup(tok[1]);
			continue;
		}
		if (strcmp(tok[0], "l2") == 0) {
			if (l2_flush >= 0)
				die("%s:%d: duplicate key \"l2\"", file, lineno);
			if (ntok != 2 || (strcmp(tok[1], "warm") != 0 && strcmp(tok[1], "flush") != 0))
				die("%s:%d: l2: want \"l2 warm\" or \"l2 flush\"", file, lineno);
			l2_flush = strcmp(tok[1], "flush") == 0;
			continue;
		}
		if (strcmp(tok[0], "graph") == 0) {
			if (graph_batch)
				die("%s:%d: duplicate key \"graph\"", file, lineno);
			if (ntok != 2 || !parse_u64(tok[1], 10000000, &graph_batch) || graph_batch < 1)
				die("%s:%d: graph: want one integer in [1, 10000000]", file, lineno);
			continue;
		}
#endif
		size_t k = 0;
		while (k < NSCALARS && strcmp(tok[0], scalars[k].key) != 0)
			k++;
		if (k == NSCALARS)
			die("%s:%d: unknown key \"%s\"", file, lineno, tok[0]);
		if (seen[k])
			die("%s:%d: duplicate key \"%s\"", file, lineno, tok[0]);
		if (ntok != 2 || !parse_u64(tok[1], scalars[k].max, vals[k]) || *vals[k] < scalars[k].min)
			die("%s:%d: %s: want one integer in [%" PRIu64 ", %" PRIu64 "]", file, lineno, tok[0],
			    scalars[k].min, scalars[k].max);
		seen[k] = 1;
	}
	if (ferror(f))
		die("read %s: %s", file, strerror(errno));
	fclose(f);
	free(line);
	free(tok);
	if (lineno == 0)
		die("%s: empty file, want \"tilepipe-visit 3\"", file);
	for (size_t k = 0; k < NSCALARS; k++)
		if (!seen[k])
			die("%s: missing key \"%s\"", file, scalars[k].key);
	if (npools != NPOOLS)
		die("%s: want the warm and fresh pools", file);
	size_t outputs = 0;
	for (size_t i = 0; i < v->nparams; i++)
		outputs += v->params[i].role == ROLE_OUTPUT;
	if (outputs == 0)
		die("%s: no output param", file);
}

/* ---- memory ---- */

static unsigned char canary(size_t o) { return (unsigned char)(0xA5 ^ (o & 0xff)); }

/* map_region maps a param's memory file of one pool inside an inaccessible
 * reservation: inputs read-only (the file is sealed; replay's seal makes a
 * writable shared mapping impossible), outputs read-write. */
static void map_region(struct visit *v, struct param *p, int k)
{
	struct region *g = &p->reg[k];
	const struct pool *pl = &v->pools[k];
	size_t want = align_up(set_offset(p->bytes, pl, pl->sets), PAGE);
	struct stat st;
	if (fstat(g->fd, &st) != 0)
		die("param %s %s file: fd %d: %s", p->name, pool_names[k], g->fd, strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != want)
		die("param %s %s file: fd %d has %jd bytes, want a memory file of %zu", p->name, pool_names[k], g->fd,
		    (intmax_t)st.st_size, want);
	int seals = fcntl(g->fd, F_GET_SEALS);
	int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	/* A fresh input may be sealed against future writes only: replay
	 * rewrites it between novel samples through the mapping it made
	 * before the seal, and no mapping of ours can be writable. */
	int write_seal = seals >= 0 && ((seals & F_SEAL_WRITE) || (k == FRESH && (seals & F_SEAL_FUTURE_WRITE)));
	if (p->role == ROLE_INPUT && (seals < 0 || (seals & need) != need || !write_seal))
		die("param %s %s file: fd %d is not sealed against writes", p->name, pool_names[k], g->fd);
	if (p->role == ROLE_OUTPUT && (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK)) != 0))
		die("param %s %s file: fd %d is not a writable memory file", p->name, pool_names[k], g->fd);
	g->size = want;
	g->ino = st.st_ino;
	g->dev = st.st_dev;
	unsigned char *res = mmap(NULL, want + 2 * (size_t)RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		die("param %s %s file: reserve %zu bytes: %s", p->name, pool_names[k], want, strerror(errno));
	int prot = p->role == ROLE_INPUT ? PROT_READ : PROT_READ | PROT_WRITE;
	g->map = mmap(res + RESERVE, want, prot, MAP_SHARED | MAP_FIXED | MAP_POPULATE, g->fd, 0);
	if (g->map == MAP_FAILED)
		die("param %s %s file: map fd %d: %s", p->name, pool_names[k], g->fd, strerror(errno));
	close(g->fd);
}

static void map_buffers(struct visit *v)
{
	for (int k = 0; k < NPOOLS; k++)
		v->sets[k] = xmalloc(v->pools[k].sets * v->nparams * sizeof(void *));
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		for (int k = 0; k < NPOOLS; k++) {
			map_region(v, p, k);
			for (uint64_t s = 0; s < v->pools[k].sets; s++)
				v->sets[k][s * v->nparams + i] = p->reg[k].map + set_offset(p->bytes, &v->pools[k], s);
		}
		if (p->role == ROLE_OUTPUT)
			p->copy = xmalloc(v->pools[WARM].sets * p->bytes);
	}
}

static unsigned char *set_data(const struct visit *v, const struct param *p, int k, uint64_t s)
{
	return p->reg[k].map + set_offset(p->bytes, &v->pools[k], s);
}

static void poison(struct visit *v, uint64_t set, int which)
{
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		unsigned char *d = set_data(v, p, WARM, set);
		for (size_t off = 0; off < p->bytes; off += p->elem)
			memcpy(d + off, p->poison[which], p->elem);
	}
}

/* ---- faults ---- */

/* A report line is built in one buffer and written with one write(2). The
 * fault handler builds its own with the async-signal-safe helpers below. */
struct sline {
	char b[512];
	size_t n;
};

static void sput(struct sline *l, const char *s)
{
	while (*s && l->n < sizeof l->b - 2)
		l->b[l->n++] = *s++;
}

static void sput_u64(struct sline *l, uint64_t x)
{
	char d[24];
	int n = 0;
	do
		d[n++] = (char)('0' + x % 10);
	while ((x /= 10) != 0);
	while (n > 0 && l->n < sizeof l->b - 2)
		l->b[l->n++] = d[--n];
}

/* fault_reason names the buffer a faulting address belongs to: an input's
 * sealed mapping (a write) or a guard reservation. Returns 0 when the
 * address is none of ours. */
static int fault_reason(struct sline *l, uintptr_t a)
{
	const struct visit *v = the_visit;
	if (!v)
		return 0;
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		for (int k = 0; k < NPOOLS; k++) {
			const struct region *g = &p->reg[k];
			if (!g->map)
				continue;
			uintptr_t lo = (uintptr_t)g->map, hi = lo + g->size;
			if (a >= lo && a < hi && p->role == ROLE_INPUT) {
				/* The set whose data starts at or before the address. */
				size_t stride = align_up(p->bytes, ALIGN) + v->pools[k].gap, o = a - lo;
				uint64_t s = o < v->pools[k].gap ? 0 : (o - v->pools[k].gap) / stride;
				if (s >= v->pools[k].sets)
					s = v->pools[k].sets - 1;
				size_t start = set_offset(p->bytes, &v->pools[k], s);
				sput(l, "input_written: ");
				sput(l, p->name);
				sput(l, " ");
				sput(l, pool_names[k]);
				sput(l, " set ");
				sput_u64(l, s);
				sput(l, o >= start ? " byte " : " byte -");
				sput_u64(l, o >= start ? o - start : start - o);
				return 1;
			}
			if ((a >= lo - RESERVE && a < lo) || (a >= hi && a < hi + RESERVE)) {
				sput(l, "guard_fault: ");
				sput(l, p->name);
				sput(l, " ");
				sput(l, pool_names[k]);
				sput(l, a < lo ? " before, " : " after, ");
				sput_u64(l, a < lo ? lo - a : a - hi + 1);
				sput(l, " bytes away");
				return 1;
			}
		}
	}
	return 0;
}

/* on_fault reports a write to an input or into a guard reservation as a
 * fault report and exits; any other fault crashes as it would have. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	struct sline l = {.n = 0};
	sput(&l, "{\"type\": \"fault\", \"reason\": \"");
	/* Only a fault the kernel raised (si_code > 0) has a real address. */
	if (si->si_code > 0 && fault_reason(&l, (uintptr_t)si->si_addr)) {
		sput(&l, "\"}\n");
		const char *p = l.b;
		size_t n = l.n;
		while (n > 0) {
			ssize_t w = write(REPORT_FD, p, n);
			if (w <= 0)
				break;
			p += w;
			n -= (size_t)w;
		}
		_exit(0);
	}
	/* Crash as the signal would have: a fault re-faults on return, a
	 * signal sent by a process is sent again. */
	signal(sig, SIG_DFL);
	if (si->si_code <= 0)
		raise(sig);
}

static void install_fault_handler(void)
{
	static unsigned char stack[1 << 16];
	stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
	if (sigaltstack(&ss, NULL) != 0)
		die("sigaltstack: %s", strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0 || sigaction(SIGBUS, &sa, NULL) != 0)
		die("sigaction: %s", strerror(errno));
}

/* ---- checks: each returns 1 on pass, or writes reason and returns 0 ---- */

/* check_guards checks every canary byte of every output file of the pools
 * up to last (WARM or FRESH). */
static int check_guards(const struct visit *v, struct report *r, int last, const char *suffix)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		for (int k = 0; k <= last; k++) {
			const struct region *g = &p->reg[k];
			size_t o = 0;
			for (uint64_t s = 0; s <= v->pools[k].sets; s++) {
				size_t end = s < v->pools[k].sets ? set_offset(p->bytes, &v->pools[k], s) : g->size;
				for (; o < end; o++)
					if (g->map[o] != canary(o)) {
						snprintf(r->reason, sizeof r->reason, "guard_overwritten: %s %s byte %zu%s",
							 p->name, pool_names[k], o, suffix);
						return 0;
					}
				o = end + p->bytes;
			}
		}
	}
	return 1;
}

static int check_poison(const struct visit *v, struct report *r, uint64_t set, int which)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		const unsigned char *d = set_data(v, p, WARM, set);
		for (size_t off = 0; off < p->bytes; off += p->elem)
			if (memcmp(d + off, p->poison[which], p->elem) == 0) {
				snprintf(r->reason, sizeof r->reason, "output_not_overwritten: %s set %" PRIu64 " element %zu",
					 p->name, set, off / p->elem);
				return 0;
			}
	}
	return 1;
}

/* check_inputs finds every input mapping in /proc/self/maps, whole, still
 * the sealed file, read-only and shared: a kernel that moved or replaced
 * one would be reading or writing memory of its own. */
static int check_inputs(const struct visit *v, struct report *r, const char *suffix)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		die("open /proc/self/maps: %s", strerror(errno));
	size_t want = 0, found = 0;
	char *line = NULL;
	size_t cap = 0;
	int seen[MAX_PARAMS][NPOOLS] = {{0}};
	while (getline(&line, &cap, f) != -1) {
		uintptr_t lo, hi;
		char perms[8];
		unsigned long long ino;
		unsigned maj, min;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %x:%x %llu", &lo, &hi, perms, &maj, &min, &ino) != 6)
			continue;
		for (size_t i = 0; i < v->nparams; i++) {
			const struct param *p = &v->params[i];
			for (int k = 0; p->role == ROLE_INPUT && k < NPOOLS; k++) {
				const struct region *g = &p->reg[k];
				if (lo == (uintptr_t)g->map && hi == (uintptr_t)g->map + g->size && strcmp(perms, "r--s") == 0 &&
				    ino == (unsigned long long)g->ino && makedev(maj, min) == g->dev)
					seen[i][k] = 1;
			}
		}
	}
	free(line);
	fclose(f);
	for (size_t i = 0; i < v->nparams; i++) {
		if (v->params[i].role != ROLE_INPUT)
			continue;
		for (int k = 0; k < NPOOLS; k++) {
			want++;
			if (seen[i][k]) {
				found++;
				continue;
			}
			snprintf(r->reason, sizeof r->reason, "input_remapped: %s %s%s", v->params[i].name, pool_names[k], suffix);
			return 0;
		}
	}
	return found == want;
}

/* first_diff returns the offset of the first differing byte, or n. */
static size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
	if (memcmp(a, b, n) == 0)
		return n;
	size_t i = 0;
	while (a[i] == b[i])
		i++;
	return i;
}

static int check_repeat(const struct visit *v, struct report *r, uint64_t set)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		size_t off = first_diff(set_data(v, p, WARM, set), p->copy + set * p->bytes, p->bytes);
		if (off < p->bytes) {
			snprintf(r->reason, sizeof r->reason, "not_repeatable: %s set %" PRIu64 " byte %zu", p->name, set, off);
			return 0;
		}
	}
	return 1;
}

/* ---- commands ---- */

/* Replay's commands come on fd 3, a Unix stream socket (a pipe works too),
 * one line each. A command may carry descriptors (SCM_RIGHTS): the CUDA
 * timer's "novel SEQ N" carries the sample's staged allocation
 * (docs/gpu-clock.md); no other command carries any. Replay sends one
 * command and waits for its answer, so the descriptors that arrive belong
 * to the line they arrive with. */
enum { MAX_COMMAND = 126, MAX_REQUEST = 8190, MAX_CMD_FDS = MAX_PARAMS };

/* commands reads lines of at most max bytes from fd. */
struct commands {
	int fd;
	size_t max;
	char buf[MAX_REQUEST + 2];
	size_t n;
	int fds[MAX_CMD_FDS];
	int nfds;
	int lost; /* descriptors beyond MAX_CMD_FDS, closed */
};

static void take_fds(struct commands *c, struct msghdr *m)
{
	for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
			if (c->nfds < MAX_CMD_FDS)
				c->fds[c->nfds++] = fd;
			else {
				close(fd);
				c->lost++;
			}
		}
	}
	if (m->msg_flags & MSG_CTRUNC)
		c->lost++;
}

/* next_command reads the next line into line (c->max + 2 bytes, the line
 * without its newline) and returns 1, or 0 when replay closed c->fd.
 * Descriptors the line carried are in c->fds until the caller takes them. */
static int next_command(struct commands *c, char *line)
{
	if (c->max == 0 || c->max > MAX_REQUEST)
		die("next_command: a reader of %zu-byte lines", c->max);
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->n);
		if (nl) {
			size_t len = (size_t)(nl - c->buf);
			memcpy(line, c->buf, len);
			line[len] = 0;
			c->n -= len + 1;
			memmove(c->buf, nl + 1, c->n);
			return 1;
		}
		if (c->n > c->max)
			die("command: want one line of at most %zu bytes", c->max);
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(MAX_CMD_FDS * sizeof(int))];
		} ctl;
		struct iovec io = {.iov_base = c->buf + c->n, .iov_len = c->max + 2 - c->n};
		struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
		ssize_t got = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
		if (got < 0 && errno == ENOTSOCK)
			got = read(c->fd, c->buf + c->n, c->max + 2 - c->n);
		else if (got >= 0)
			take_fds(c, &m);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			die("read commands on fd %d: %s", c->fd, strerror(errno));
		if (got == 0) {
			if (c->n > 0)
				die("command: %zu bytes without a newline before fd %d closed", c->n, c->fd);
			return 0;
		}
		c->n += (size_t)got;
	}
}

/* command_fds checks that the command just read carried want descriptors
 * (0 or 1) and returns the one it carried (-1 for none). */
static int command_fds(struct commands *c, const char *cmd, int want)
{
	if (c->nfds != want || c->lost)
		die("command \"%s\": carried %d descriptor(s), want %d", cmd, c->nfds + c->lost, want);
	c->nfds = 0;
	return want ? c->fds[0] : -1;
}

#ifdef TILEPIPE_CUDA
#include "cuda/backend.c"
#endif

/* ---- report ---- */

static int passed(struct report *r, enum check c)
{
	r->ran[c] = 1;
	return 1;
}

/* fail_check marks c failed: earlier checks passed, later ones did not run. */
static int fail_check(struct report *r, enum check c)
{
	for (int i = 0; i < NCHECKS; i++)
		r->checks[i] = i < (int)c ? "pass" : i == (int)c ? "fail" : "not_run";
	return 0;
}

/* fail_entry records a failed call: checks that have passed stay "pass". */
static int fail_entry(struct report *r, const char *when, int rc)
{
	snprintf(r->reason, sizeof r->reason, "entry_failed: returned %d%s", rc, when);
	for (int i = 0; i < NCHECKS; i++)
		r->checks[i] = r->ran[i] ? "pass" : "not_run";
	return 0;
}

/* A report line is built in one buffer and written with one write(2). */
struct line {
	char b[2048];
	size_t n;
};

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(l->b + l->n, sizeof l->b - l->n, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof l->b - l->n)
		die("report line too long");
	l->n += (size_t)n;
}

static void put_json_string(struct line *l, const char *s)
{
	put(l, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(l, "\\%c", c);
		else if (c < 0x20)
			put(l, "\\u%04x", c);
		else
			put(l, "%c", c);
	}
	put(l, "\"");
}

static void send_line(struct line *l)
{
	put(l, "\n");
	const char *p = l->b;
	size_t n = l->n;
	while (n > 0) {
		ssize_t w = write(REPORT_FD, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("write report on fd %d: %s", REPORT_FD, strerror(errno));
		p += w;
		n -= (size_t)w;
	}
}

/* send_status writes a validated or final report. */
static void send_status(const struct visit *v, const struct report *r, int ok, const char *type)
{
	struct line l = {.n = 0};
	put(&l, "{\"type\": \"%s\", \"status\": \"%s\", \"reason\": ", type, ok ? "ok" : "failed");
	put_json_string(&l, r->reason);
	put(&l, ", \"checks\": {");
	for (int i = 0; i < NCHECKS; i++)
		put(&l, "%s\"%s\": \"%s\"", i ? ", " : "", check_names[i], ok ? "pass" : r->checks[i]);
	put(&l, "}");
	if (strcmp(type, "validated") == 0)
		put(&l, ", \"threads\": %" PRIu64 ", \"output_policy\": \"direct\", \"cold_ns\": %" PRId64, v->threads,
		    cold_ns < 0 ? 0 : cold_ns);
	put(&l, "}");
	send_line(&l);
}

/* ---- timing ---- */

/* run_sample times n back-to-back calls, call i on set (*cursor + i) mod
 * nsets, and advances the cursor. Nothing but the calls, one OR and the
 * set rotation sits between the two clock reads. */
#ifndef TILEPIPE_CUDA
static int64_t run_sample(uint64_t n, void **sets, size_t nparams, uint64_t nsets, uint64_t *cursor)
{
	int (*fn)(void *const *) = entry_fn;
	int acc = 0;
	uint64_t s = *cursor;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < n; i++) {
		acc |= fn(sets + s * nparams);
		if (++s == nsets)
			s = 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*cursor = s;
	timed_rc |= acc;
	return (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
}
#endif

/* parse_command reads "VERB SEQ N". */
static int parse_command(const char *cmd, const char *verb, uint64_t *seq, uint64_t *n)
{
	char v[8], s[32], c[32], extra;
	return sscanf(cmd, "%7s %31s %31s %c", v, s, c, &extra) == 3 && strcmp(v, verb) == 0 &&
	       parse_u64(s, UINT64_C(1) << 62, seq) && parse_u64(c, MAX_CALLS_PER_SAMPLE, n);
}

/* serve answers replay's commands until "end": "run SEQ N" runs a sample of
 * N calls over the warm sets, "novel SEQ N" N calls on fresh sets 0 to
 * N-1 as replay just rewrote them (its novel slots); each is answered with
 * the timer's own span. */
static void serve(struct commands *in, struct visit *v)
{
	char cmd[MAX_COMMAND + 2];
	uint64_t cursor = 0;
#ifdef TILEPIPE_CUDA
	int filled = 0; /* the warm outputs' fill is on the device */
#endif
	while (next_command(in, cmd)) {
		if (strcmp(cmd, "end") == 0) {
			command_fds(in, cmd, 0);
			return;
		}
#ifdef TILEPIPE_CUDA
		/* Replay wrote its fill over the warm outputs before its first
		 * command (docs/protocol.md, step 3). */
		if (!filled) {
			gpu_warm_fill(v);
			filled = 1;
		}
#endif
		uint64_t s, n;
		int64_t ns;
		if (parse_command(cmd, "run", &s, &n)) {
			command_fds(in, cmd, 0);
#ifdef TILEPIPE_CUDA
			gpu_flush();
			ns = gpu_sample(WARM, 0, n, v->pools[WARM].sets, &cursor);
#else
			ns = run_sample(n, v->sets[WARM], v->nparams, v->pools[WARM].sets, &cursor);
#endif
		} else if (parse_command(cmd, "novel", &s, &n)) {
			/* n calls, call i on fresh set i, on whatever replay wrote
			 * there since the last sample (docs/protocol4-design.md). */
			if (n > v->pools[FRESH].sets)
				die("command \"%s\": want 0 to %" PRIu64 " novel calls (the fresh sets)", cmd, v->pools[FRESH].sets);
#ifdef TILEPIPE_CUDA
			/* The slots come staged by replay's monitor, as one fresh
			 * allocation whose descriptor the command carries. */
			if (n == 0)
				die("command \"%s\": a staged novel sample of no calls", cmd);
			ns = gpu_novel_staged(command_fds(in, cmd, 1), n);
#else
			command_fds(in, cmd, 0);
			ns = run_sample(n, v->sets[FRESH], v->nparams, n ? n : 1, &(uint64_t){0});
#endif
#ifdef TILEPIPE_CUDA
		} else if (parse_command(cmd, "graph", &s, &n)) {
			command_fds(in, cmd, 0);
			/* n replays of the graph of graph_batch calls. */
			if (!graph_batch)
				die("command \"%s\": the visit file has no \"graph N\" line", cmd);
			if (n < 1 || n > 65536 || n * graph_batch > 10000000)
				die("command \"%s\": want 1 to 65536 replays of at most 10000000 calls", cmd);
			gpu_graph_build(v); /* before the flush: its stream then waits for it */
			gpu_flush();
			ns = gpu_graph_sample(n);
			n *= graph_batch;
#endif
		} else
			die("command \"%s\": want \"run SEQ N\", \"novel SEQ N\", \"graph SEQ R\" (GPU) or \"end\"", cmd);
		struct line l = {.n = 0};
		put(&l, "{\"type\": \"sample\", \"seq\": %" PRIu64 ", \"calls\": %" PRIu64 ", \"ns\": %" PRId64 "}", s, n, ns);
		send_line(&l);
	}
	die("fd %d closed before \"end\"", CMD_FD);
}

/* validate_call runs one validation call on a warm set and checks 2-5
 * (docs/protocol.md); which selects the poison pattern. */
static int validate_call(struct visit *v, struct report *r, uint64_t set, int which)
{
	poison(v, set, which);
#ifdef TILEPIPE_CUDA
	gpu_outputs(v, WARM, set, 1);
	int failed = gpu_call(v, r, WARM, set) != 0;
	if (cold_ns < 0)
		cold_ns = gpu.module_ns + gpu.call_ns;
	if (failed) {
		for (int i = 0; i < NCHECKS; i++)
			r->checks[i] = r->ran[i] ? "pass" : "not_run";
		return 0;
	}
	if (!gpu_check(v, r, ""))
		return fail_check(r, CHECK_GUARDS);
#else
	int64_t t0 = mono_ns();
	int rc = entry_fn(v->sets[WARM] + set * v->nparams);
	if (cold_ns < 0)
		cold_ns = mono_ns() - t0;
	if (rc != 0) {
		char when[48];
		snprintf(when, sizeof when, " (set %" PRIu64 ")", set);
		return fail_entry(r, when, rc);
	}
#endif
	if (!check_guards(v, r, WARM, ""))
		return fail_check(r, CHECK_GUARDS);
	passed(r, CHECK_GUARDS);
	if (!check_poison(v, r, set, which))
		return fail_check(r, CHECK_POISON);
	passed(r, CHECK_POISON);
	if (!check_inputs(v, r, ""))
		return fail_check(r, CHECK_INPUTS);
	return passed(r, CHECK_INPUTS);
}

/* The route objects' constructors, which prepare moved out of
 * .init_array into section tilepipe_init (prepare/policy.go): they run
 * here, once, just before the first call of the entry, never before the
 * timer starts. The linker defines the bounds when any object has the
 * section; weak, they are null when none has. */
typedef void (*route_init_fn)(void);
extern route_init_fn const __start_tilepipe_init[] __attribute__((weak));
extern route_init_fn const __stop_tilepipe_init[] __attribute__((weak));

static void route_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	for (route_init_fn const *f = __start_tilepipe_init; f && f < __stop_tilepipe_init; f++)
		(*f)();
}

/* validate runs steps 1-6 on every warm set and reports whether every
 * check passed. The outputs stay where the calls wrote them. */
static int validate(struct visit *v, struct report *r)
{
	route_init();
	for (uint64_t s = 0; s < v->pools[WARM].sets; s++) {
		if (!validate_call(v, r, s, 0))
			return 0;
		for (size_t i = 0; i < v->nparams; i++) {
			struct param *p = &v->params[i];
			if (p->role == ROLE_OUTPUT)
				memcpy(p->copy + s * p->bytes, set_data(v, p, WARM, s), p->bytes);
		}
		if (!validate_call(v, r, s, 1))
			return 0;
		if (!check_repeat(v, r, s))
			return fail_check(r, CHECK_REPEAT);
		passed(r, CHECK_REPEAT);
	}
	return 1;
}

/* after_timing runs the checks after the timed calls. */
static int after_timing(struct visit *v, struct report *r)
{
#ifdef TILEPIPE_CUDA
	if (timed_rc != 0) {
		snprintf(r->reason, sizeof r->reason, "%s (during timing)", cu_error(timed_rc, "a timed launch"));
		for (int i = 0; i < NCHECKS; i++)
			r->checks[i] = r->ran[i] ? "pass" : "not_run";
		return 0;
	}
	/* Replay compares every warm set with the validated outputs. */
	for (uint64_t s = 0; s < v->pools[WARM].sets; s++)
		gpu_outputs(v, WARM, s, 0);
	if (!gpu_check(v, r, " (after timing)"))
		return fail_check(r, CHECK_GUARDS);
#endif
	if (timed_rc != 0)
		return fail_entry(r, " (during timing)", timed_rc);
	if (!check_guards(v, r, FRESH, " (after timing)"))
		return fail_check(r, CHECK_GUARDS);
	if (!check_inputs(v, r, " (after timing)"))
		return fail_check(r, CHECK_INPUTS);
	return 1;
}

static int run_visit(const char *file)
{
	if (fcntl(CMD_FD, F_GETFD) < 0 || fcntl(REPORT_FD, F_GETFD) < 0)
		die("fds %d and %d: want replay's command socket and report pipe (docs/protocol.md, visit)", CMD_FD, REPORT_FD);
	static struct visit v;
	parse_visit(file, &v);
	map_buffers(&v);
#ifdef TILEPIPE_CUDA
	gpu_init(&v);
#endif
	the_visit = &v;
	install_fault_handler();

	static struct commands in = {.fd = CMD_FD, .max = MAX_COMMAND};
	struct report r = {.reason = ""};
	int ok = validate(&v, &r);
	/* Replay's MALLOC_PERTURB_ fill is for the validation calls (their
	 * outputs are compared across visits); timed calls pay no memset per
	 * allocation. */
	mallopt(M_PERTURB, 0);
	send_status(&v, &r, ok, "validated");
	if (ok) {
		serve(&in, &v);
		send_status(&v, &r, after_timing(&v, &r), "final");
	}
	/* Stay until replay closes fd 3: it looks for processes left behind
	 * while the timer is still here to hold the visit open. */
	for (char b[256];;) {
		ssize_t got = read(CMD_FD, b, sizeof b);
		if (got == 0 || (got < 0 && errno != EINTR))
			break;
	}
	_exit(0);
}

/* ---- closure ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct paths {
	char **v;
	size_t n, cap;
};

static void add_path(struct paths *ps, char *path)
{
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 32;
		ps->v = realloc(ps->v, ps->cap * sizeof *ps->v);
		if (!ps->v)
			die("out of memory");
	}
	ps->v[ps->n++] = path;
}

/* mapped_file returns the path of a /proc/self/maps line if it names a
 * regular file that still exists, else NULL. */
static const char *mapped_file(const char *line)
{
	static const char deleted[] = " (deleted)";
	int off = -1;
	/* address perms offset dev inode [pathname] */
	if (sscanf(line, "%*s %*s %*s %*s %*s %n", &off) != 0 || off < 0)
		return NULL;
	const char *path = line + off;
	if (path[0] != '/')
		return NULL; /* anonymous, [heap], [vdso], [stack], ... */
	size_t n = strlen(path), nd = sizeof deleted - 1;
	if (n >= nd && strcmp(path + n - nd, deleted) == 0)
		return NULL;
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	return path;
}

static int run_closure(void)
{
#ifdef TILEPIPE_CUDA
	cu_load(); /* the driver's files are the timer's too */
#endif
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		die("open /proc/self/maps: %s", strerror(errno));
	struct paths ps = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) != -1) {
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = 0;
		const char *path = mapped_file(line);
		if (path)
			add_path(&ps, xstrdup(path));
	}
	if (ferror(f))
		die("read /proc/self/maps: %s", strerror(errno));
	fclose(f);
	free(line);
	char *exe = realpath("/proc/self/exe", NULL);
	if (!exe)
		die("resolve /proc/self/exe: %s", strerror(errno));
	add_path(&ps, exe);

	qsort(ps.v, ps.n, sizeof *ps.v, cmp_str);
	for (size_t i = 0; i < ps.n; i++)
		if (i == 0 || strcmp(ps.v[i], ps.v[i - 1]) != 0)
			printf("%s\n", ps.v[i]);
	if (fflush(stdout) != 0 || ferror(stdout))
		die("write closure: %s", strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--visit") == 0)
		return run_visit(argv[2]);
	if (argc == 2 && strcmp(argv[1], "--closure") == 0)
		return run_closure();
#ifdef TILEPIPE_CUDA
	if (argc >= 2 && strcmp(argv[1], "--ceilings") == 0)
		return run_ceilings(argc - 2, argv + 2);
	if (argc == 2 && strcmp(argv[1], "--health") == 0)
		return run_health();
	if (argc == 2 && strcmp(argv[1], "--telemetry") == 0)
		return run_telemetry();
	die("usage: cuda-timer --visit VISIT.txt | cuda-timer --closure | cuda-timer --ceilings [LIBCUBLAS] | cuda-timer --health | cuda-timer --telemetry");
#endif
	die("usage: harness --visit VISIT.txt | harness --closure");
}
