/*
 * fault.c: a naive gemm (C[M,N] = A[M,K] * B[K,N], f32, row-major) with one
 * compile-time fault, for the harness tests. Build with e.g.
 *
 *     cc -O2 -ffp-contract=off -DM=16 -DN=16 -DK=16 -DFAULT=overrun -c fault.c
 *
 * FAULT is one of:
 *   none              correct
 *   halfwrite         writes only the first half of C
 *   overrun           writes C, then one float past its end
 *   underrun          writes C, then one float before its start
 *   mutate            flips the low bit of A[0]
 *   nondeterministic  adds the call count to C[0]'s bits (differs on call 2)
 *   offbybound        C[0] += 1.0f: plausible-looking, caught by the oracle, not the harness
 *   failrc            returns 3
 *   crash             raises SIGSEGV on the first call
 *   cached            writes C on the first call only, as a result cache would
 *   secondfailrc      returns 4 from the second call on
 *   latefailrc        returns 5 from the fifth call on (inside timing: two
 *                     warm sets take four validation calls)
 *   lateoverrun       writes one float past C from the fifth call on
 *   latemutate        flips the low bit of A[0] on the fifth call
 *   farwrite          writes C, then one float 64 KiB past its start
 *   scratch           uses A[5] as scratch and restores it
 *   remap             replaces A's page with a private writable copy
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#if !defined(M) || !defined(N) || !defined(K) || !defined(FAULT)
#error "define M, N, K and FAULT"
#endif

#define FAULT_none 1
#define FAULT_halfwrite 2
#define FAULT_overrun 3
#define FAULT_underrun 4
#define FAULT_mutate 5
#define FAULT_nondeterministic 6
#define FAULT_offbybound 7
#define FAULT_failrc 8
#define FAULT_crash 9
#define FAULT_cached 10
#define FAULT_secondfailrc 11
#define FAULT_latefailrc 12
#define FAULT_lateoverrun 13
#define FAULT_latemutate 14
#define FAULT_farwrite 15
#define FAULT_scratch 16
#define FAULT_remap 17
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SEL CAT(FAULT_, FAULT)
#if SEL == 0
#error "unknown FAULT"
#endif

static unsigned long calls;

static inline void flip_low_bit(float *x)
{
	unsigned char b[sizeof *x];
	memcpy(b, x, sizeof b);
	b[0] ^= 1;
	memcpy(x, b, sizeof b);
}

int tilepipe_entry(void *const *buffers)
{
	float *A = buffers[0];
	const float *B = buffers[1];
	float *C = buffers[2];
	unsigned long call = ++calls;
	(void)call;

#if SEL == FAULT_failrc
	return 3;
#endif
#if SEL == FAULT_secondfailrc
	if (call >= 2)
		return 4;
#endif
#if SEL == FAULT_crash
	raise(SIGSEGV);
#endif
#if SEL == FAULT_cached
	if (call >= 2)
		return 0;
#endif

	int rows = M;
#if SEL == FAULT_halfwrite
	rows = M / 2;
#endif
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int k = 0; k < K; k++)
				acc += A[i * K + k] * B[k * N + j];
			C[i * N + j] = acc;
		}

#if SEL == FAULT_overrun
	C[M * N] = 1.0f;
#endif
#if SEL == FAULT_underrun
	C[-1] = 1.0f;
#endif
#if SEL == FAULT_mutate
	flip_low_bit(&A[0]);
#endif
#if SEL == FAULT_nondeterministic
	{
		unsigned int bits;
		memcpy(&bits, &C[0], sizeof bits);
		bits += (unsigned int)(call - 1);
		memcpy(&C[0], &bits, sizeof bits);
	}
#endif
#if SEL == FAULT_offbybound
	C[0] += 1.0f;
#endif
#if SEL == FAULT_latefailrc
	if (call >= 5)
		return 5;
#endif
#if SEL == FAULT_lateoverrun
	if (call >= 5)
		C[M * N] = 1.0f;
#endif
#if SEL == FAULT_latemutate
	if (call == 5)
		flip_low_bit(&A[0]);
#endif
#if SEL == FAULT_farwrite
	C[(1 << 16) / sizeof *C] = 1.0f;
#endif
#if SEL == FAULT_scratch
	{
		volatile float *a = A;
		float keep = a[5];
		a[5] = 0.0f;
		a[5] = keep;
	}
#endif
#if SEL == FAULT_remap
	if (call == 1) {
		static unsigned char save[4096];
		void *page = (void *)((uintptr_t)A & ~(uintptr_t)4095);
		memcpy(save, page, sizeof save);
		if (mmap(page, sizeof save, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == page)
			memcpy(page, save, sizeof save);
	}
#endif
	return 0;
}
