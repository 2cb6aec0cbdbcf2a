package artifacts

import (
	"maps"
	"path/filepath"
	"slices"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TB is what the test helpers below need of a testing.TB. They take this
// rather than testing.TB so that the store, which the binary links, does
// not link the testing package with them (issue 28's binary weight).
type TB interface {
	Helper()
	TempDir() string
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// TestStore creates an empty store in a fresh temporary directory for a
// test, failing the test if it cannot.
func TestStore(t TB) *Store {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "stage"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

// CheckStage opens the stage at dir (every blob re-hashed) and checks
// ValidateStage's invariants, for the end of a stage's tests.
func CheckStage(t TB, dir, artifactType string) {
	t.Helper()
	st, err := OpenStage(dir, artifactType, nil)
	if err != nil {
		t.Fatalf("CheckStage: %v", err)
	}
	if err := ValidateStage(st); err != nil {
		t.Errorf("CheckStage: %v", err)
	}
}

// TestCheckpoint writes a small valid checkpoint for a test, without
// running a route: a capture of no cases, the prepared stage made from it
// and a replay of that, each with its document, its receipt (every blob of
// its predecessors recorded as verified) and its manifest's subject, so
// OpenCheckpoint opens it and ValidateCheckpoint finds nothing. It
// returns the three stage directories, in order.
func TestCheckpoint(t TB) (capture, prepared, replay string) {
	t.Helper()
	dir := t.TempDir()
	var preds []*Stage
	step := func(name, typ string, doc any) string {
		t.Helper()
		out := filepath.Join(dir, name)
		s, err := Create(out)
		if err != nil {
			t.Fatalf("TestCheckpoint: %v", err)
		}
		rec := Receipt{Stage: name, Tool: ToolInfo(), Parameters: map[string]any{}, Environment: Environment{CPUFlags: []string{}},
			Commands: []Command{}, ResolvedDependencies: []Dependency{}, StartedOn: time.Now().UTC()}
		var subject *ocispec.Descriptor
		for i, p := range preds {
			rec.ResolvedDependencies = append(rec.ResolvedDependencies, Dependency{Name: StageName(p.Manifest.ArtifactType) + " manifest", Digest: p.Descriptor.Digest, VerifiedAt: time.Now().UTC()})
			for _, title := range slices.Sorted(maps.Keys(p.Layers)) {
				rec.ResolvedDependencies = append(rec.ResolvedDependencies, Dependency{Name: title, Digest: p.Layers[title].Digest, VerifiedAt: time.Now().UTC()})
			}
			if i == 0 {
				d := p.Descriptor
				d.Annotations = nil
				subject = &d
			}
		}
		if _, err := s.Finish(typ, doc, rec, subject, nil); err != nil {
			t.Fatalf("TestCheckpoint: %s: %v", name, err)
		}
		st, err := OpenStage(out, typ, nil)
		if err != nil {
			t.Fatalf("TestCheckpoint: %s: %v", name, err)
		}
		preds = append([]*Stage{st}, preds...)
		return out
	}
	capture = step("capture", CaptureType, CaptureDoc{Schema: DocSchema, Cohort: "none", Threads: 1, Routes: []Route{}, Cases: []CapturedCase{}})
	capDigest := preds[0].Descriptor.Digest
	prepared = step("prepare", PreparedType, PreparedDoc{Schema: DocSchema, Capture: capDigest, Threads: 1, CC: []string{}, Entries: []Prepared{}})
	replay = step("replay", ReplayType, ReplayDoc{Schema: DocSchema, Prepared: preds[0].Descriptor.Digest, Capture: capDigest, Routes: []string{}, Cases: []string{},
		Plan: []Visit{}, Inputs: InputSeeds{Rounds: []uint64{}}, Sessions: []Session{}, Visits: []VisitResult{}, Closure: []ClosureCheck{}, Summary: []Summary{}})
	return capture, prepared, replay
}
