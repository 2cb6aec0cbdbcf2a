package main

import (
	"strings"
	"testing"
)

const run = `goos: linux
BenchmarkRefGemm/n=1024-2         	       3	 200000000 ns/op
BenchmarkRefGemm/n=4096-2         	       1	3000000000 ns/op
BenchmarkRefGemm/n=4096-2         	       1	3400000000 ns/op
BenchmarkRefGemm/n=4096-2         	       1	9000000000 ns/op
BenchmarkOpenBLASDgemmTwice/n=1024-2	       3	 100000000 ns/op
BenchmarkOpenBLASDgemmTwice/n=4096-2	       1	1000000000 ns/op
BenchmarkAddReference-2   	       5	 165427180 ns/op	2000.00 MB/s	  12 B/op	 3 allocs/op
BenchmarkMemoryWrite-2    	       5	 182210226 ns/op	3000.00 MB/s
BenchmarkAddCompare-2     	       5	  86859024 ns/op	1000.00 MB/s
BenchmarkMemoryRead-2     	       5	  57075675 ns/op	5000.00 MB/s
BenchmarkPutStream-2   	      10	  85522630 ns/op	 784.69 MB/s
BenchmarkCopySync-2    	      10	  85076438 ns/op	 788.81 MB/s
`

// TestTable: medians over counts, each ratio against its limit, and the
// targets missed marked.
func TestTable(t *testing.T) {
	res, err := parse(strings.NewReader(run))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := table(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| oracle: gemm 4096³ reference + bound vs two OpenBLAS dgemm | 3.4e+09 ns/op | 1e+09 ns/op | 3.40 | ≤ 2 | **no** |",
		"| oracle: gemm 1024³ reference + bound vs two OpenBLAS dgemm | 2e+08 ns/op | 1e+08 ns/op | 2.00 | ≤ 2 | yes |",
		"| oracle: add 2^24 reference + bound vs writing its bytes | 2000.0 MB/s | 3000.0 MB/s | 0.67 | ≥ 0.5 | yes |",
		"| oracle: add 2^24 compare vs reading its bytes | 1000.0 MB/s | 5000.0 MB/s | 0.20 | ≥ 0.5 | **no** |",
		"| store: 64 MiB blob vs cp + sync | 784.7 MB/s | 788.8 MB/s | 0.99 | ≥ 0.8 | yes |",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMissing: a target whose benchmark or anchor did not run is an
// error naming it, not a row left out.
func TestMissing(t *testing.T) {
	res, err := parse(strings.NewReader(strings.ReplaceAll(run, "BenchmarkCopySync", "BenchmarkCopy")))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := table(&b, res); err == nil || err.Error() != "no result for BenchmarkPutStream or BenchmarkCopySync (MB/s)" {
		t.Fatalf("table without CopySync: %v", err)
	}
}
