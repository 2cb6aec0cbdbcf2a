package harness

import _ "embed"

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
