// An elementwise add, C = A + B, in f32: the tutorial's C kernel
// (docs/tutorial.md). tilepipe writes tilepipe_case.h for each case it
// builds: the case's dims (TP_M, TP_N) and where each tensor is in args
// (TP_ARG_A, TP_ARG_B, TP_ARG_C), as compile-time constants.
//
// tilepipe-ops: add
// tilepipe-cflags: -O3

#include "tilepipe_case.h"

int tilepipe_kernel(void *const *args)
{
	const float *a = args[TP_ARG_A];
	const float *b = args[TP_ARG_B];
	float *c = args[TP_ARG_C];

	for (long i = 0; i < (long)TP_M * TP_N; i++)
		c[i] = a[i] + b[i];
	return 0;
}
