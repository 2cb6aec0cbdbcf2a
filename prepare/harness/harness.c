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
 *                                 fd 3 and report on fd 4 (protocol 2)
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
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <sys/types.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tilepipe_entry(void *const *buffers);

/*
 * Every call goes through this pointer. Reading it is a volatile access, so
 * the compiler cannot see which function is called and must make each call,
 * even if a future build links the entry with LTO.
 */
static int (*volatile entry_fn)(void *const *) = tilepipe_entry;

/* Return codes of warm-up and timed calls, OR-ed, checked after timing. */
static volatile int timed_rc;

enum {
	GUARD = 4096,        /* guard bytes on each side; a multiple of ALIGN */
	ALIGN = 64,          /* alignment of every buffer's data start */
	MAX_NAME = 64, /* longest param name */
};
#define MAX_CALLS_PER_SAMPLE (UINT64_C(1) << 30)
#define MAX_BYTES (UINT64_C(1) << 40)

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

struct param {
	char *name;
	char *path;
	enum role role;
	size_t elem;  /* element size: 2 (f16, bf16), 4 (f32) or 8 (i64) */
	const unsigned char (*poison)[8]; /* the two poison patterns of the dtype */
	size_t bytes;
	unsigned char *base; /* guard, data, guard */
	unsigned char *data; /* base + GUARD, ALIGN-aligned */
	unsigned char *copy; /* input: private copy; output: first call's result */
};

/* The protocol's descriptors: commands from replay, reports to replay. */
enum { CMD_FD = 3, REPORT_FD = 4 };

struct visit {
	const char *file;
	uint64_t threads;
	struct param *params;
	size_t nparams;
};

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

static const struct {
	const char *key;
	uint64_t min, max;
} scalars[] = {
	{"threads", 1, 1 << 20},
};
enum { NSCALARS = sizeof scalars / sizeof scalars[0] };

static void parse_param(struct visit *v, int lineno, char **tok, size_t ntok)
{
	const char *f = v->file;
	if (ntok < 6)
		die("%s:%d: param: want \"param ROLE NAME DTYPE BYTES PATH [DIM...]\", got %zu fields", f, lineno, ntok);
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
	if (!parse_u64(tok[4], MAX_BYTES, &bytes))
		die("%s:%d: param %s: bad byte count \"%s\"", f, lineno, tok[2], tok[4]);
	if (bytes % p.elem != 0)
		die("%s:%d: param %s: %" PRIu64 " bytes is not a multiple of %s's %zu", f, lineno, tok[2], bytes,
		    tok[3], p.elem);
	p.bytes = (size_t)bytes;
	if (ntok > 6) {
		uint64_t elems = 1;
		for (size_t i = 6; i < ntok; i++) {
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
	p.path = xstrdup(tok[5]);
	v->params = realloc(v->params, (v->nparams + 1) * sizeof *v->params);
	if (!v->params)
		die("out of memory");
	v->params[v->nparams++] = p;
}

static void parse_visit(const char *file, struct visit *v)
{
	FILE *f = fopen(file, "r");
	if (!f)
		die("open %s: %s", file, strerror(errno));
	memset(v, 0, sizeof *v);
	v->file = file;
	uint64_t *vals[NSCALARS] = {&v->threads};
	int seen[NSCALARS] = {0};
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
			if (ntok != 2 || strcmp(tok[0], "tilepipe-visit") != 0 || strcmp(tok[1], "2") != 0)
				die("%s:1: bad header, want \"tilepipe-visit 2\"", file);
			continue;
		}
		if (ntok == 0)
			die("%s:%d: empty line", file, lineno);
		if (strcmp(tok[0], "param") == 0) {
			parse_param(v, lineno, tok, ntok);
			continue;
		}
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
		die("%s: empty file, want \"tilepipe-visit 2\"", file);
	for (size_t k = 0; k < NSCALARS; k++)
		if (!seen[k])
			die("%s: missing key \"%s\"", file, scalars[k].key);
	size_t outputs = 0;
	for (size_t i = 0; i < v->nparams; i++)
		outputs += v->params[i].role == ROLE_OUTPUT;
	if (outputs == 0)
		die("%s: no output param", file);
}

/* ---- buffers ---- */

static unsigned char canary(size_t i) { return (unsigned char)(0xA5 ^ (i & 0xff)); }

static void read_input(struct param *p)
{
	int fd = open(p->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("input %s: open %s: %s", p->name, p->path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("input %s: stat %s: %s", p->name, p->path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		die("input %s: %s is not a regular file", p->name, p->path);
	if ((uint64_t)st.st_size != p->bytes)
		die("input %s: %s has %jd bytes, want %zu", p->name, p->path, (intmax_t)st.st_size, p->bytes);
	size_t got = 0;
	while (got < p->bytes) {
		ssize_t r = read(fd, p->data + got, p->bytes - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("input %s: read %s: %s", p->name, p->path, strerror(errno));
		if (r == 0)
			die("input %s: %s has %zu bytes, want %zu", p->name, p->path, got, p->bytes);
		got += (size_t)r;
	}
	unsigned char extra;
	ssize_t r = read(fd, &extra, 1);
	if (r < 0)
		die("input %s: read %s: %s", p->name, p->path, strerror(errno));
	if (r > 0)
		die("input %s: %s has more than %zu bytes", p->name, p->path, p->bytes);
	close(fd);
}

static void alloc_buffers(struct visit *v)
{
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		void *mem;
		int rc = posix_memalign(&mem, ALIGN, (size_t)GUARD + p->bytes + GUARD);
		if (rc != 0)
			die("allocate %zu bytes for %s: %s", p->bytes, p->name, strerror(rc));
		p->base = mem;
		p->data = p->base + GUARD;
		for (size_t j = 0; j < GUARD; j++) {
			p->base[j] = canary(j);
			p->data[p->bytes + j] = canary(j);
		}
		p->copy = xmalloc(p->bytes);
		if (p->role == ROLE_INPUT) {
			read_input(p);
			memcpy(p->copy, p->data, p->bytes);
		}
	}
}

static const unsigned char *poison_of(const struct param *p, int which)
{
	return p->poison[which];
}

static void poison(struct visit *v, int which)
{
	for (size_t i = 0; i < v->nparams; i++) {
		struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		const unsigned char *pat = poison_of(p, which);
		for (size_t off = 0; off < p->bytes; off += p->elem)
			memcpy(p->data + off, pat, p->elem);
	}
}

/* ---- checks: each returns 1 on pass, or writes reason and returns 0 ---- */

static int check_guards(const struct visit *v, struct report *r, const char *suffix)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		const unsigned char *after = p->data + p->bytes;
		for (size_t j = 0; j < GUARD; j++)
			if (p->base[j] != canary(j)) {
				snprintf(r->reason, sizeof r->reason, "guard_overwritten: %s before byte %zu%s", p->name, j,
					 suffix);
				return 0;
			}
		for (size_t j = 0; j < GUARD; j++)
			if (after[j] != canary(j)) {
				snprintf(r->reason, sizeof r->reason, "guard_overwritten: %s after byte %zu%s", p->name, j,
					 suffix);
				return 0;
			}
	}
	return 1;
}

static int check_poison(const struct visit *v, struct report *r, int which)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		const unsigned char *pat = poison_of(p, which);
		for (size_t off = 0; off < p->bytes; off += p->elem)
			if (memcmp(p->data + off, pat, p->elem) == 0) {
				snprintf(r->reason, sizeof r->reason, "output_not_overwritten: %s element %zu", p->name,
					 off / p->elem);
				return 0;
			}
	}
	return 1;
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

static int check_inputs(const struct visit *v, struct report *r, const char *suffix)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_INPUT)
			continue;
		size_t off = first_diff(p->data, p->copy, p->bytes);
		if (off < p->bytes) {
			snprintf(r->reason, sizeof r->reason, "input_mutated: %s byte %zu%s", p->name, off, suffix);
			return 0;
		}
	}
	return 1;
}

static int check_repeat(const struct visit *v, struct report *r)
{
	for (size_t i = 0; i < v->nparams; i++) {
		const struct param *p = &v->params[i];
		if (p->role != ROLE_OUTPUT)
			continue;
		size_t off = first_diff(p->data, p->copy, p->bytes);
		if (off < p->bytes) {
			snprintf(r->reason, sizeof r->reason, "not_repeatable: %s byte %zu", p->name, off);
			return 0;
		}
	}
	return 1;
}

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
		put(&l, ", \"threads\": %" PRIu64 ", \"output_policy\": \"direct\"", v->threads);
	put(&l, "}");
	send_line(&l);
}

/* ---- outputs ---- */

static void write_all(int fd, const unsigned char *b, size_t n, const char *name, const char *path)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("output %s: write %s: %s", name, path, strerror(errno));
		b += w;
		n -= (size_t)w;
	}
}

/* write_output writes a temp file beside path and renames it into place, so
 * a reader never sees a partial output. */
static void write_output(const struct param *p)
{
	static const char suffix[] = ".tmp-XXXXXX";
	size_t len = strlen(p->path);
	char *tmp = xmalloc(len + sizeof suffix);
	memcpy(tmp, p->path, len);
	memcpy(tmp + len, suffix, sizeof suffix);
	int fd = mkstemp(tmp);
	if (fd < 0)
		die("output %s: create temp file for %s: %s", p->name, p->path, strerror(errno));
	write_all(fd, p->copy, p->bytes, p->name, tmp);
	if (fchmod(fd, 0644) != 0 || fsync(fd) != 0 || close(fd) != 0) {
		int e = errno;
		unlink(tmp);
		die("output %s: write %s: %s", p->name, tmp, strerror(e));
	}
	if (rename(tmp, p->path) != 0) {
		int e = errno;
		unlink(tmp);
		die("output %s: rename to %s: %s", p->name, p->path, strerror(e));
	}
	/* Make the rename durable; the directory is the path up to its last '/'. */
	char *slash = strrchr(tmp, '/');
	if (slash == tmp)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
	int dfd = open(slash ? tmp : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(tmp);
}

/* ---- timing ---- */

/* run_sample times n back-to-back calls. Nothing but the calls and one OR
 * per call sits between the two clock reads. */
static int64_t run_sample(uint64_t n, void *const *bufs)
{
	int (*fn)(void *const *) = entry_fn;
	int acc = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < n; i++)
		acc |= fn(bufs);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	timed_rc |= acc;
	return (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
}

/* serve answers replay's commands until "end": "run SEQ N" runs a sample of
 * N calls and reports the timer's own span for it. */
static void serve(FILE *in, void *const *bufs)
{
	char cmd[128];
	while (fgets(cmd, sizeof cmd, in)) {
		size_t len = strlen(cmd);
		if (len == 0 || cmd[len - 1] != '\n')
			die("command: want one line of at most %zu bytes", sizeof cmd - 2);
		cmd[len - 1] = 0;
		if (strcmp(cmd, "end") == 0)
			return;
		char seq[32], calls[32], extra;
		uint64_t s, n;
		if (sscanf(cmd, "run %31s %31s %c", seq, calls, &extra) != 2 || !parse_u64(seq, UINT64_C(1) << 62, &s) ||
		    !parse_u64(calls, MAX_CALLS_PER_SAMPLE, &n))
			die("command \"%s\": want \"run SEQ N\" or \"end\"", cmd);
		int64_t ns = run_sample(n, bufs);
		struct line l = {.n = 0};
		put(&l, "{\"type\": \"sample\", \"seq\": %" PRIu64 ", \"calls\": %" PRIu64 ", \"ns\": %" PRId64 "}", s, n, ns);
		send_line(&l);
	}
	die("fd %d closed before \"end\"", CMD_FD);
}

/* validate_call runs one validation call and checks 3-6 (docs/protocol.md);
 * which selects the poison pattern. */
static int validate_call(struct visit *v, struct report *r, void *const *bufs, int which)
{
	poison(v, which);
	int rc = entry_fn(bufs);
	if (rc != 0)
		return fail_entry(r, "", rc);
	if (!check_guards(v, r, ""))
		return fail_check(r, CHECK_GUARDS);
	passed(r, CHECK_GUARDS);
	if (!check_poison(v, r, which))
		return fail_check(r, CHECK_POISON);
	passed(r, CHECK_POISON);
	if (!check_inputs(v, r, ""))
		return fail_check(r, CHECK_INPUTS);
	return passed(r, CHECK_INPUTS);
}

/* validate runs steps 2-8 and reports whether every check passed. */
static int validate(struct visit *v, struct report *r, void *const *bufs)
{
	if (!validate_call(v, r, bufs, 0))
		return 0;
	for (size_t i = 0; i < v->nparams; i++)
		if (v->params[i].role == ROLE_OUTPUT)
			memcpy(v->params[i].copy, v->params[i].data, v->params[i].bytes);
	if (!validate_call(v, r, bufs, 1))
		return 0;
	if (!check_repeat(v, r))
		return fail_check(r, CHECK_REPEAT);
	passed(r, CHECK_REPEAT);

	for (size_t i = 0; i < v->nparams; i++)
		if (v->params[i].role == ROLE_OUTPUT)
			write_output(&v->params[i]);
	return 1;
}

/* after_timing runs the checks after the timed calls. */
static int after_timing(struct visit *v, struct report *r)
{
	if (timed_rc != 0)
		return fail_entry(r, " (during timing)", timed_rc);
	if (!check_guards(v, r, " (after timing)"))
		return fail_check(r, CHECK_GUARDS);
	if (!check_inputs(v, r, " (after timing)"))
		return fail_check(r, CHECK_INPUTS);
	return 1;
}

static int run_visit(const char *file)
{
	if (fcntl(CMD_FD, F_GETFD) < 0 || fcntl(REPORT_FD, F_GETFD) < 0)
		die("fds %d and %d: want replay's command and report pipes (docs/protocol.md, visit)", CMD_FD, REPORT_FD);
	struct visit v;
	parse_visit(file, &v);
	alloc_buffers(&v);
	void **bufs = xmalloc(v.nparams * sizeof *bufs);
	for (size_t i = 0; i < v.nparams; i++)
		bufs[i] = v.params[i].data;

	FILE *in = fdopen(CMD_FD, "r");
	if (!in)
		die("fd %d: %s", CMD_FD, strerror(errno));
	struct report r = {.reason = ""};
	int ok = validate(&v, &r, bufs);
	send_status(&v, &r, ok, "validated");
	if (ok) {
		serve(in, bufs);
		send_status(&v, &r, after_timing(&v, &r), "final");
	}
	/* Stay until replay closes fd 3: it looks for processes left behind
	 * while the timer is still here to hold the visit open. */
	while (fgetc(in) != EOF)
		;
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
	die("usage: harness --visit VISIT.txt | harness --closure");
}
