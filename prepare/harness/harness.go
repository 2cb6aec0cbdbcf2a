package harness

import (
	_ "embed"
	"os"
	"path/filepath"
)

// Source is harness.c, the C timer that prepare compiles once
// (`cc -O2 -c harness.c`) and links, unchanged, with an object route's
// captured objects. The result implements `--visit VISIT.txt` and
// `--closure` as specified in docs/protocol.md; prepare stores these bytes
// by digest so a replay times exactly the harness that was prepared.
//
//go:embed harness.c
var Source []byte

// CUDABackend is cuda/backend.c, the CUDA back end harness.c includes when
// built with -DTILEPIPE_CUDA: the CUDA timer that runs a cubin route's
// kernel (docs/gpu.md). It must sit at cuda/backend.c beside harness.c.
//
//go:embed cuda/backend.c
var CUDABackend []byte

// WriteCUDA writes the CUDA timer's sources into dir, laid out as its
// build wants them (harness.c, cuda/backend.c), with mode perm, and
// returns harness.c's path: compile it with -DTILEPIPE_CUDA and link
// with -ldl.
func WriteCUDA(dir string, perm os.FileMode) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "cuda"), 0o755); err != nil {
		return "", err
	}
	src := filepath.Join(dir, "harness.c")
	for _, f := range []struct {
		path string
		b    []byte
	}{{src, Source}, {filepath.Join(dir, "cuda", "backend.c"), CUDABackend}} {
		if err := os.WriteFile(f.path, f.b, perm); err != nil {
			return "", err
		}
	}
	return src, nil
}
