//go:build cgo

package oracle

/*
#cgo LDFLAGS: -lopenblas

// The two prototypes are declared here rather than taken from <cblas.h>.
// On Debian that header is an update-alternatives link which, once another
// BLAS is installed (libblas-dev, BLIS), names that library's cblas.h:
// without openblas_get_config, and not necessarily with OpenBLAS's integer
// width. What is linked is fixed: -lopenblas, Debian's LP64 libopenblas.so
// (32-bit integers; the ILP64 build is libopenblas64.so), and the enum
// values are the CBLAS standard's (CblasRowMajor 101, CblasNoTrans 111).
void cblas_dgemm(int order, int transA, int transB, int M, int N, int K,
		 double alpha, const double *A, int lda, const double *B, int ldb,
		 double beta, double *C, int ldc);
char *openblas_get_config(void);
void openblas_set_num_threads(int);
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
)

// dgemm is OpenBLAS's cblas_dgemm where cgo is on. OpenBLAS 0.3.21 (the
// pthreads build Debian 12 ships, USE_THREAD) is safe to call from several
// goroutines at once, as capture --jobs and dgemmOpenBLAS's row blocks do:
// its buffer allocation is under a lock (TestDgemmConcurrent). When it loads,
// the library picks its kernels from the CPU (OPENBLAS_CORETYPE in the
// environment at process start overrides the pick;
// docs/results/2026-12-01-oracle-blas.md) and its number of threads, which
// changes the summation order of some shapes: results may differ in the
// last bits between machines and runs, which SamePacket allows for.
var dgemm = dgemmOpenBLAS

// OpenBLAS's own threads stay unused: after each threaded call its
// workers spin for about 0.1 s of CPU (THREAD_TIMEOUT) before they sleep,
// and replay computes references while a visit may be starting or timing.
// dgemmOpenBLAS splits the rows between goroutines instead, each a
// single-threaded call that leaves nothing running when it returns.
func init() { C.openblas_set_num_threads(1) }

// rowBlock is the fewest rows a goroutine of dgemmOpenBLAS takes.
const rowBlock = 64

// dgemmOpenBLAS sets c = a·b for row-major a (M×K), b (K×N) and c (M×N):
// a block of rows per goroutine (GOMAXPROCS of them at most), each block a
// single-threaded cblas_dgemm.
func dgemmOpenBLAS(M, N, K int, a, b, c []float64) {
	if M == 0 || N == 0 {
		return
	}
	if K == 0 {
		clear(c[:M*N])
		return
	}
	if M > math.MaxInt32 || N > math.MaxInt32 || K > math.MaxInt32 {
		panic(fmt.Sprintf("oracle: dgemm %dx%dx%d beyond cblas's int dimensions", M, N, K))
	}
	// cblas reads and writes exactly these ranges; Go checks them here.
	_, _, _ = a[M*K-1], b[K*N-1], c[M*N-1]
	parts := min(runtime.GOMAXPROCS(0), max(1, M/rowBlock))
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := M*i/parts, M*(i+1)/parts
		wg.Go(func() {
			C.cblas_dgemm(cblasRowMajor, cblasNoTrans, cblasNoTrans, C.int(hi-lo), C.int(N), C.int(K),
				1, (*C.double)(&a[lo*K]), C.int(K), (*C.double)(&b[0]), C.int(N),
				0, (*C.double)(&c[lo*N]), C.int(N))
		})
	}
	wg.Wait()
}

// dgemmOpenBLASThreaded is one plain cblas_dgemm with OpenBLAS's own
// threads (threads of them), the library's best on these cores: the
// anchor BenchmarkRefGemm is measured against. Not for the oracle (its
// workers spin after the call).
func dgemmOpenBLASThreaded(threads, M, N, K int, a, b, c []float64) {
	C.openblas_set_num_threads(C.int(threads))
	defer C.openblas_set_num_threads(1)
	_, _, _ = a[M*K-1], b[K*N-1], c[M*N-1]
	C.cblas_dgemm(cblasRowMajor, cblasNoTrans, cblasNoTrans, C.int(M), C.int(N), C.int(K),
		1, (*C.double)(&a[0]), C.int(K), (*C.double)(&b[0]), C.int(N),
		0, (*C.double)(&c[0]), C.int(N))
}

var openblasConfig = sync.OnceValue(func() string { return C.GoString(C.openblas_get_config()) })

// BLAS names the Dgemm this build's [Reference] uses for the gemm family:
// OpenBLAS's own configuration string (version, build options and the
// core whose kernels it runs), then "(cgo)".
func BLAS() string { return openblasConfig() + " (cgo)" }
