package audit

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
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

// TestEntriesAgreeData: a prepared process entry's data is its capture
// build's cache files, path and digest, in order; one left out, one of
// other bytes or one added is named.
func TestEntriesAgreeData(t *testing.T) {
	d := func(c byte) artifacts.Digest {
		return artifacts.Digest("sha256:" + string(slices.Repeat([]byte{c}, 64)))
	}
	graph := artifacts.FileRef{Path: "cache/inductor/graph.py", Role: artifacts.RoleCache, Digest: d('a'), Size: 3}
	cubin := artifacts.FileRef{Path: "cache/triton/k.cubin", Role: artifacts.RoleCache, Digest: d('b'), Size: 4}
	wrapper := artifacts.FileRef{Path: "wrapper.py", Role: artifacts.RoleWrapper, Digest: d('c'), Size: 5}
	proc := &artifacts.Process{Script: "wrapper.py"}
	cdoc := artifacts.CaptureDoc{Cases: []artifacts.CapturedCase{{Case: oracle.Case{ID: "add"}, Builds: []artifacts.Build{
		{Route: "jit", Kind: artifacts.KindProcess, Status: artifacts.StatusBuilt, Files: []artifacts.FileRef{wrapper, graph, cubin}, Process: proc}}}}}
	other := cubin
	other.Digest = d('e')
	for _, tc := range []struct {
		name string
		data []artifacts.FileRef
		want []string
	}{
		{"the build's", []artifacts.FileRef{graph, cubin}, nil},
		{"one left out", []artifacts.FileRef{graph},
			[]string{"entry add/jit: data cache/inductor/graph.py@aaaaaaaaaaaa, its capture build's cache files are cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@bbbbbbbbbbbb"}},
		{"other bytes", []artifacts.FileRef{graph, other},
			[]string{"entry add/jit: data cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@eeeeeeeeeeee, its capture build's cache files are cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@bbbbbbbbbbbb"}},
		{"the wrapper added", []artifacts.FileRef{graph, cubin, wrapper},
			[]string{"entry add/jit: data cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@bbbbbbbbbbbb, wrapper.py@cccccccccccc, its capture build's cache files are cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@bbbbbbbbbbbb"}},
		{"none", nil,
			[]string{"entry add/jit: data none, its capture build's cache files are cache/inductor/graph.py@aaaaaaaaaaaa, cache/triton/k.cubin@bbbbbbbbbbbb"}},
	} {
		pdoc := artifacts.PreparedDoc{Entries: []artifacts.Prepared{{Case: "add", Route: "jit", Kind: artifacts.KindProcess, Status: artifacts.StatusPrepared, Data: tc.data,
			Process: proc, Program: &wrapper}}}
		if got := entriesAgree(cdoc, pdoc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: entriesAgree = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEntriesAgreeCold: a prepared entry's cold costs are its build's,
// or the audit names both (a forged entry that hides or changes a
// compile time, or claims one its build never measured).
func TestEntriesAgreeCold(t *testing.T) {
	sched := map[string]any{"compile_first_call_s": 41.5, "cached_first_call_s": 3.25}
	proc, wrapper := &artifacts.Process{Script: "wrapper.py"}, artifacts.FileRef{Path: "wrapper.py", Role: artifacts.RoleWrapper}
	files := []artifacts.FileRef{wrapper}
	cdoc := artifacts.CaptureDoc{Cases: []artifacts.CapturedCase{{Case: oracle.Case{ID: "add"}, Builds: []artifacts.Build{
		{Route: "jit", Kind: artifacts.KindProcess, Status: artifacts.StatusBuilt, Process: proc, Files: files, Schedule: sched},
		{Route: "eager", Kind: artifacts.KindProcess, Status: artifacts.StatusBuilt, Process: proc, Files: files}}}}}
	for _, tc := range []struct {
		name  string
		route string
		cold  *artifacts.ColdCost
		want  []string
	}{
		{"the build's", "jit", &artifacts.ColdCost{CompileFirstCallS: 41.5, CachedFirstCallS: 3.25}, nil},
		{"hidden", "jit", nil, []string{"entry add/jit: cold none, its capture build says {compile 41.5s, cached 3.25s}"}},
		{"shortened", "jit", &artifacts.ColdCost{CompileFirstCallS: 4.15, CachedFirstCallS: 3.25},
			[]string{"entry add/jit: cold {compile 4.15s, cached 3.25s}, its capture build says {compile 41.5s, cached 3.25s}"}},
		{"invented", "eager", &artifacts.ColdCost{CompileFirstCallS: 1, CachedFirstCallS: 1},
			[]string{"entry add/eager: cold {compile 1s, cached 1s}, its capture build says none"}},
	} {
		pdoc := artifacts.PreparedDoc{Entries: []artifacts.Prepared{{Case: "add", Route: tc.route, Kind: artifacts.KindProcess, Status: artifacts.StatusPrepared, Cold: tc.cold,
			Process: proc, Program: &wrapper}}}
		if got := entriesAgree(cdoc, pdoc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: entriesAgree = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEntriesAgreeProcess: a prepared process entry runs its build's
// process and wrapper, or the audit names both: an entry edited to drop a
// user's kernel (--user-kernel), to run another op, or to run another
// script, consistently re-hashed, would time something its row does not
// name.
func TestEntriesAgreeProcess(t *testing.T) {
	d := func(c byte) artifacts.Digest {
		return artifacts.Digest("sha256:" + string(slices.Repeat([]byte{c}, 64)))
	}
	wrapper := artifacts.FileRef{Path: "wrapper.py", Role: artifacts.RoleWrapper, Digest: d('c'), Size: 5}
	args := []string{"--op", "add", "--dims", "M=4,N=64", "--user-kernel", "add.py"}
	proc := &artifacts.Process{Interpreter: "/usr/bin/python3", Script: "wrapper.py", Args: args, Env: map[string]string{}, OutputPolicy: "out"}
	cdoc := artifacts.CaptureDoc{Cases: []artifacts.CapturedCase{{Case: oracle.Case{ID: "add"}, Builds: []artifacts.Build{
		{Route: "mine", Kind: artifacts.KindProcess, Status: artifacts.StatusBuilt, Files: []artifacts.FileRef{wrapper}, Process: proc}}}}}
	dropped := *proc
	dropped.Args = args[:4]
	other := wrapper
	other.Digest = d('e')
	for _, tc := range []struct {
		name    string
		process *artifacts.Process
		program *artifacts.FileRef
		want    string
	}{
		{"the build's", proc, &wrapper, ""},
		{"the user's kernel dropped", &dropped, &wrapper,
			`entry add/mine: process {"interpreter":"/usr/bin/python3","interpreterDigest":"","script":"wrapper.py","args":["--op","add","--dims","M=4,N=64"],"env":{},"outputPolicy":"out"}, its capture build's is {"interpreter":"/usr/bin/python3","interpreterDigest":"","script":"wrapper.py","args":["--op","add","--dims","M=4,N=64","--user-kernel","add.py"],"env":{},"outputPolicy":"out"}`},
		{"no process", nil, &wrapper, `entry add/mine: process null, its capture build's is {"interpreter":`},
		{"another wrapper", proc, &other, "entry add/mine: program wrapper.py@eeeeeeeeeeee, its capture build's wrapper is wrapper.py@cccccccccccc"},
		{"no program", proc, nil, "entry add/mine: program none, its capture build's wrapper is wrapper.py@cccccccccccc"},
	} {
		pdoc := artifacts.PreparedDoc{Entries: []artifacts.Prepared{{Case: "add", Route: "mine", Kind: artifacts.KindProcess, Status: artifacts.StatusPrepared,
			Process: tc.process, Program: tc.program}}}
		got := entriesAgree(cdoc, pdoc)
		if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)) {
			t.Errorf("%s: entriesAgree = %q, want one problem starting %q", tc.name, got, tc.want)
		}
	}
}
