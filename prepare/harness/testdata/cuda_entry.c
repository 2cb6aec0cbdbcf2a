/*
 * cuda_entry.c: an object route's CUDA entry for the tests that run the
 * CUDA timer on the fake driver (internal/fakecuda), whose device memory
 * is host memory: C[M,N] = A[M,K] * B[K,N] in plain C on the buffers the
 * timer passes. FAULT picks what it does on a novel call (a buffer set it
 * has not seen in validation: the first two A pointers are the warm
 * sets'), where replay's monitor stages the slots:
 *
 *   none    correct
 *   input   also flips the low bit of A[1] (an input written on the device)
 *   gap     also writes the float after C (the canary gap that follows)
 *
 *     cc -O2 -ffp-contract=off -DM=16 -DN=16 -DK=16 -DFAULT=FAULT_input -c cuda_entry.c
 */
#if !defined(M) || !defined(N) || !defined(K) || !defined(FAULT)
#error "define M, N, K and FAULT"
#endif

#define FAULT_none 1
#define FAULT_input 2
#define FAULT_gap 3

int tilepipe_entry(void *const *b, void *stream)
{
	(void)stream;
	float *A = b[0], *B = b[1], *C = b[2];
	static const void *warm[2];
	static int nwarm;
	int novel = 1;
	for (int i = 0; i < nwarm; i++)
		novel &= warm[i] != A;
	if (novel && nwarm < 2) {
		warm[nwarm++] = A;
		novel = 0;
	}
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = 0;
			for (int k = 0; k < K; k++)
				s += A[i * K + k] * B[k * N + j];
			C[i * N + j] = s;
		}
	if (novel && FAULT == FAULT_input)
		((unsigned char *)A)[4] ^= 1;
	if (novel && FAULT == FAULT_gap)
		C[M * N] = 0;
	return 0;
}
