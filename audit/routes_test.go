package audit

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
)

func TestRoutesAgree(t *testing.T) {
	const answer = `{"protocol": 1, "name": "naive", "kind": "object", "version": "1.2", "available": true, "reason": "", "ops": ["gemm", "add"], "validates": false, "accepts_ir": false}` + "\n"
	describe := digest.FromString(answer)
	program := digest.FromString("#!/bin/sh\n")
	blobs := map[artifacts.Digest]string{describe: answer}
	read := func(d artifacts.Digest) ([]byte, error) {
		b, ok := blobs[d]
		if !ok {
			return nil, fmt.Errorf("blob %s is not a layer of the capture", artifacts.Short(d))
		}
		return []byte(b), nil
	}
	layers := map[string]ocispec.Descriptor{"routes/naive/describe.json": {Digest: describe}, "routes/naive/route": {Digest: program}}
	honest := artifacts.Route{Name: "naive", Kind: "object", Version: "1.2", Available: true, Ops: []string{"gemm", "add"}, Exec: "/x/route", Digest: program, Describe: describe, External: true}
	short := artifacts.Short(describe)
	tests := []struct {
		name string
		edit func(r *artifacts.Route)
		want []string
	}{
		{"the same", func(*artifacts.Route) {}, nil},
		{"version", func(r *artifacts.Route) { r.Version = "9.9" }, []string{`route naive: version "9.9", its describe.json (` + short + `) says "1.2"`}},
		{"kind and availability", func(r *artifacts.Route) { r.Kind, r.Available, r.Reason = "process", false, "no torch" }, []string{
			`route naive: kind "process", its describe.json (` + short + `) says "object"`,
			`route naive: available "false", its describe.json (` + short + `) says "true"`,
			`route naive: reason "no torch", its describe.json (` + short + `) says ""`}},
		{"ops", func(r *artifacts.Route) { r.Ops = []string{"gemm"} }, []string{"route naive: ops [gemm], its describe.json (" + short + ") says [gemm add]"}},
		{"validates", func(r *artifacts.Route) { r.Validates = true }, []string{`route naive: validates "true", its describe.json (` + short + `) says "false"`}},
		{"build cache", func(r *artifacts.Route) { r.BuildCache = true }, []string{`route naive: buildCache "true", its describe.json (` + short + `) says "false"`}},
		{"program", func(r *artifacts.Route) { r.Digest = describe }, []string{"route naive: digest " + string(describe) + ", the layer routes/naive/route is " + string(program)}},
		{"describe elsewhere", func(r *artifacts.Route) { r.Describe = program }, []string{
			"route naive: describe " + string(program) + ", the layer routes/naive/describe.json is " + string(describe),
			"route naive: describe: blob " + artifacts.Short(program) + " is not a layer of the capture"}},
	}
	for _, tt := range tests {
		r := honest
		r.Ops = append([]string(nil), honest.Ops...)
		tt.edit(&r)
		if got := routesAgree([]artifacts.Route{r}, layers, read); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("routesAgree(%s) =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
	renamed := honest
	renamed.Name = "other"
	if got, want := routesAgree([]artifacts.Route{renamed}, layers, read), []string{
		"route other: no layer routes/other/describe.json",
		`route other: name "other", its describe.json (` + short + `) says "naive"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("routesAgree(renamed) =\n%q\nwant\n%q", got, want)
	}
}
