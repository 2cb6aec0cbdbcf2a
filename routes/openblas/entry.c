/*
 * tilepipe entry for the openblas route: C = A·B through cblas_sgemm.
 *
 * The route compiles this file once per case with -DTP_M=, -DTP_N= and
 * -DTP_K= so the dimensions are constants of the captured object, exactly as
 * a compiled kernel's would be. Buffers arrive in signature order:
 * A f32[M,K] in, B f32[K,N] in, C f32[M,N] out, all dense row-major.
 *
 * Threads come from OPENBLAS_NUM_THREADS, which tilepipe sets for the visit;
 * nothing here overrides it.
 */
#include <cblas.h>

#if !defined(TP_M) || !defined(TP_N) || !defined(TP_K)
#error "compile with -DTP_M=<M> -DTP_N=<N> -DTP_K=<K>"
#endif

int tilepipe_entry(void *const *b)
{
	const float *A = (const float *)b[0];
	const float *B = (const float *)b[1];
	float *C = (float *)b[2];

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
		    TP_M, TP_N, TP_K,
		    1.0f, A, TP_K, B, TP_N,
		    0.0f, C, TP_N);
	return 0;
}
