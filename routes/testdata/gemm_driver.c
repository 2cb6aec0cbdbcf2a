/*
 * Test driver for an object route's gemm entry: reads A and B, calls
 * tilepipe_entry once, writes C. Not a timer; routes_test.go uses it to check
 * that a captured entry.o links with the route's link arguments and computes
 * C = A·B.
 *
 *   gemm_driver M N K A.bin B.bin C.bin
 */
#include <stdio.h>
#include <stdlib.h>

int tilepipe_entry(void *const *b);

static void *slurp(const char *path, size_t n)
{
	FILE *f = fopen(path, "rb");
	void *p = malloc(n);
	if (!f || !p || fread(p, 1, n, f) != n) {
		fprintf(stderr, "gemm_driver: read %s: want %zu bytes\n", path, n);
		exit(1);
	}
	fclose(f);
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: gemm_driver M N K A.bin B.bin C.bin\n");
		return 2;
	}
	size_t M = strtoul(argv[1], 0, 10), N = strtoul(argv[2], 0, 10), K = strtoul(argv[3], 0, 10);
	void *b[3];
	b[0] = slurp(argv[4], M * K * sizeof(float));
	b[1] = slurp(argv[5], K * N * sizeof(float));
	b[2] = calloc(M * N, sizeof(float));
	int r = tilepipe_entry(b);
	if (r != 0) {
		fprintf(stderr, "gemm_driver: entry returned %d\n", r);
		return 1;
	}
	FILE *f = fopen(argv[6], "wb");
	if (!f || fwrite(b[2], sizeof(float), M * N, f) != M * N || fclose(f) != 0) {
		fprintf(stderr, "gemm_driver: write %s failed\n", argv[6]);
		return 1;
	}
	return 0;
}
