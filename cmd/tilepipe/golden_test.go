package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tilepipe/tilepipe/internal/golden"
	"github.com/tilepipe/tilepipe/internal/protocol"
)

// TestRoutesGolden: tilepipe routes' table from fixed describe answers (the
// live command's rows depend on what the machine has; TestCohortsAndRoutesList
// runs it): an available route with every extra, one without any, an
// unavailable one with its reason, and one whose describe failed.
func TestRoutesGolden(t *testing.T) {
	var b bytes.Buffer
	err := routesTable(&b, []routeRow{
		{name: "halide", d: protocol.Description{Kind: "object", Version: "14.0.0", Available: true, Ops: []string{"add", "gemm"}, Validates: true, AcceptsIR: true, Devices: []string{"cpu", "cuda"}, BuildCache: true}},
		{name: "openblas", d: protocol.Description{Kind: "object", Version: "0.3.21", Available: true, Ops: []string{"gemm"}}},
		{name: "torch-eager", d: protocol.Description{Kind: "process", Version: "-", Reason: "no torch: python3 -c 'import torch' failed"}},
		{name: "triton", err: errors.New("describe: exec: no such file")},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "routes.txt", b.Bytes())
}

// TestCohortsGolden: tilepipe cohorts lists every built-in cohort, how
// replay times it and its cases; a cohort edited changes this file.
func TestCohortsGolden(t *testing.T) {
	var b bytes.Buffer
	if err := listCohorts(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "cohorts.txt", b.Bytes())
}
