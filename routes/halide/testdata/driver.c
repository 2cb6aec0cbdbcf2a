/* driver: a minimal stand-in for tilepipe's timer, used by halide_test.go.
 *
 *   driver in:DTYPE:COUNT:PATH out:DTYPE:COUNT:PATH ...   (one per signature param)
 *
 * DTYPE is f32, f16, bf16 or i64; outputs are poisoned with the protocol's
 * pattern for their dtype.
 * Every buffer sits between 4096-byte canary guards. Inputs are read from
 * PATH, outputs are poisoned, the entry is called twice (re-poisoned with a
 * second pattern in between) and every check of docs/protocol.md's visit
 * steps 3-7 is made; then outputs are written to PATH. A failed check prints
 * its reason on stderr and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tilepipe_entry(void *const *buffers);

#define GUARD 4096
#define MAXP 16

static unsigned char canary(size_t i) { return (unsigned char)(0xA5 ^ (i & 0xff)); }

struct param {
    int out;
    size_t count;
    size_t size; /* bytes per element */
    uint64_t poison1, poison2;
    const char *path;
    unsigned char *base; /* guard, data, guard */
    unsigned char *data;
    unsigned char *copy;  /* inputs: pristine copy; outputs: first call's result */
};

static int nparams;
static struct param ps[MAXP];

/* Little-endian hosts only, as the protocol's buffers are. */
static void poison(int second) {
    for (int p = 0; p < nparams; p++) {
        if (!ps[p].out) continue;
        uint64_t bits = second ? ps[p].poison2 : ps[p].poison1;
        for (size_t i = 0; i < ps[p].count; i++) memcpy(&ps[p].data[i * ps[p].size], &bits, ps[p].size);
    }
}

static int check(int second, const char *when) {
    for (int p = 0; p < nparams; p++) {
        size_t bytes = ps[p].count * ps[p].size;
        uint64_t bits = second ? ps[p].poison2 : ps[p].poison1;
        for (size_t i = 0; i < GUARD; i++) {
            if (ps[p].base[i] != canary(i)) {
                fprintf(stderr, "guard_overwritten: p%d before byte %zu%s\n", p, i, when);
                return 1;
            }
            if (ps[p].base[GUARD + bytes + i] != canary(i)) {
                fprintf(stderr, "guard_overwritten: p%d after byte %zu%s\n", p, i, when);
                return 1;
            }
        }
        if (ps[p].out) {
            for (size_t i = 0; i < ps[p].count; i++) {
                uint64_t got = 0;
                memcpy(&got, &ps[p].data[i * ps[p].size], ps[p].size);
                if (got == bits) {
                    fprintf(stderr, "output_not_overwritten: p%d element %zu%s\n", p, i, when);
                    return 1;
                }
            }
        } else if (memcmp(ps[p].data, ps[p].copy, bytes) != 0) {
            fprintf(stderr, "input_mutated: p%d%s\n", p, when);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    void *bufs[MAXP];
    nparams = argc - 1;
    if (nparams < 1 || nparams > MAXP) {
        fprintf(stderr, "usage: driver in|out:DTYPE:COUNT:PATH ...\n");
        return 2;
    }
    for (int p = 0; p < nparams; p++) {
        char role[4], dtype[5];
        unsigned long long count;
        int off = 0;
        if (sscanf(argv[p + 1], "%3[a-z]:%4[a-z0-9]:%llu:%n", role, dtype, &count, &off) != 3 || off == 0) {
            fprintf(stderr, "driver: bad param %s\n", argv[p + 1]);
            return 2;
        }
        struct param *q = &ps[p];
        q->out = strcmp(role, "out") == 0;
        q->count = (size_t)count;
        q->path = argv[p + 1] + off;
        if (strcmp(dtype, "f32") == 0) {
            q->size = 4, q->poison1 = 0x7FC0DEAD, q->poison2 = 0x7FC0BEEF;
        } else if (strcmp(dtype, "f16") == 0) {
            q->size = 2, q->poison1 = 0x7E5D, q->poison2 = 0x7E5E;
        } else if (strcmp(dtype, "bf16") == 0) {
            q->size = 2, q->poison1 = 0x7FDE, q->poison2 = 0x7FBE;
        } else if (strcmp(dtype, "i64") == 0) {
            q->size = 8, q->poison1 = 0x7FF8DEADDEADDEADull, q->poison2 = 0x7FF8BEEFBEEFBEEFull;
        } else {
            fprintf(stderr, "driver: bad dtype in %s\n", argv[p + 1]);
            return 2;
        }
        size_t bytes = q->count * q->size;
        q->base = malloc(bytes + 2 * GUARD);
        q->copy = malloc(bytes ? bytes : 1);
        if (!q->base || !q->copy) {
            fprintf(stderr, "driver: out of memory\n");
            return 2;
        }
        for (size_t i = 0; i < GUARD; i++) {
            q->base[i] = canary(i);
            q->base[GUARD + bytes + i] = canary(i);
        }
        q->data = q->base + GUARD;
        if (!q->out) {
            FILE *f = fopen(q->path, "rb");
            if (!f || fread(q->data, q->size, q->count, f) != q->count) {
                fprintf(stderr, "driver: read %s failed\n", q->path);
                return 2;
            }
            fclose(f);
            memcpy(q->copy, q->data, bytes);
        }
        bufs[p] = q->data;
    }
    poison(0);
    int rc = tilepipe_entry(bufs);
    if (rc != 0) {
        fprintf(stderr, "entry_failed: returned %d\n", rc);
        return 1;
    }
    if (check(0, "")) return 1;
    for (int p = 0; p < nparams; p++) {
        if (ps[p].out) memcpy(ps[p].copy, ps[p].data, ps[p].count * ps[p].size);
    }
    poison(1);
    rc = tilepipe_entry(bufs);
    if (rc != 0) {
        fprintf(stderr, "entry_failed: returned %d (second call)\n", rc);
        return 1;
    }
    if (check(1, " (second call)")) return 1;
    for (int p = 0; p < nparams; p++) {
        if (!ps[p].out) continue;
        if (memcmp(ps[p].copy, ps[p].data, ps[p].count * ps[p].size) != 0) {
            fprintf(stderr, "not_repeatable: p%d\n", p);
            return 1;
        }
        FILE *f = fopen(ps[p].path, "wb");
        if (!f || fwrite(ps[p].copy, ps[p].size, ps[p].count, f) != ps[p].count || fclose(f) != 0) {
            fprintf(stderr, "driver: write %s failed\n", ps[p].path);
            return 2;
        }
    }
    return 0;
}
