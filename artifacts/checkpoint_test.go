package artifacts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
)

// stageWith commits a capture stage whose document is doc, with one layer
// titled title of media type mt; it returns the stage's directory.
func stageWith(t *testing.T, doc any, title, mt string) string {
	t.Helper()
	s := artifacts.TestStore(t)
	if title != "" {
		d, err := s.PutBytes([]byte("{}"), mt)
		if err != nil {
			t.Fatal(err)
		}
		s.Name(title, d)
	}
	if _, err := s.Finish(artifacts.CaptureType, doc, artifacts.Receipt{Stage: "capture", Tool: artifacts.ToolInfo(), Parameters: map[string]any{}, Environment: artifacts.Fingerprint()}, nil, nil); err != nil {
		t.Fatal(err)
	}
	return s.Dir()
}

// rawDocStage commits a capture stage whose tilepipe.json holds doc's
// bytes as given (Finish would marshal one value).
func rawDocStage(t *testing.T, doc string) string {
	t.Helper()
	s := artifacts.TestStore(t)
	cfg, err := s.PutJSON(map[string]string{}, artifacts.MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.PutBytes([]byte(doc), artifacts.MediaJSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(artifacts.CaptureType, cfg, []ocispec.Descriptor{artifacts.Layer(artifacts.DocTitle, d)}, nil); err != nil {
		t.Fatal(err)
	}
	return s.Dir()
}

// TestReadStage: a capture document of this schema reads; one of another
// schema, one with a field the document does not have, one followed by a
// second document, and a stage of another type are refused, each with what was expected.
func TestReadStage(t *testing.T) {
	good := stageWith(t, artifacts.CaptureDoc{Schema: artifacts.DocSchema, Cohort: "c"}, "", "")
	var doc artifacts.CaptureDoc
	if _, err := artifacts.ReadStage(good, &doc, nil); err != nil || doc.Cohort != "c" {
		t.Fatalf("ReadStage of a good capture = %v, cohort %q", err, doc.Cohort)
	}
	for _, tc := range []struct {
		name string
		dir  string
		doc  artifacts.Document
		want string
	}{
		{"schema 2", stageWith(t, artifacts.CaptureDoc{Schema: 2}, "", ""), &artifacts.CaptureDoc{}, "tilepipe.json schema: want 1, got 2"},
		{"unknown field", stageWith(t, map[string]any{"schema": 1, "extra": true}, "", ""), &artifacts.CaptureDoc{}, `unknown field "extra"`},
		{"a second document after it", rawDocStage(t, `{"schema": 1} {"schema": 2}`), &artifacts.CaptureDoc{}, "decode JSON: data after the document"},
		{"another stage's type", good, &artifacts.ReplayDoc{}, "manifest artifactType: want " + artifacts.ReplayType},
	} {
		_, err := artifacts.ReadStage(tc.dir, tc.doc, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadStage = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	_, err := artifacts.ReadStage(stageWith(t, artifacts.CaptureDoc{Schema: 2}, "", ""), &artifacts.CaptureDoc{}, nil)
	if want := "capture "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the schema error %v does not begin with the stage's name %q and directory", err, want)
	}
}

// TestValidateStage: a committed stage is valid; a null list in its document, a
// layer whose media type its title does not give, and an index.json that
// does not name it (OpenStage refuses another name, allows none) are each
// named.
func TestValidateStage(t *testing.T) {
	open := func(dir string) *artifacts.Stage {
		t.Helper()
		st, err := artifacts.OpenStage(dir, artifacts.CaptureType, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// An absent optional object (a pointer field) may be null; a list may not.
	good := stageWith(t, map[string]any{"schema": 1, "cases": []any{}, "target": nil}, "a.json", artifacts.MediaJSON)
	if err := artifacts.ValidateStage(open(good)); err != nil {
		t.Errorf("ValidateStage of a good stage = %v", err)
	}
	null := stageWith(t, map[string]any{"schema": 1, "cases": nil}, "", "")
	if err := artifacts.ValidateStage(open(null)); err == nil || err.Error() != null+": tilepipe.json: null at .cases, want a value ([] for a list)" {
		t.Errorf("ValidateStage with a null list = %v", err)
	}
	// A layer's media type as given, bypassing Finish (which sets it).
	ms := artifacts.TestStore(t)
	cfg, err := ms.PutJSON(map[string]string{}, artifacts.MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	octets, err := ms.PutBytes([]byte("{}"), artifacts.MediaOctet)
	if err != nil {
		t.Fatal(err)
	}
	octets.Annotations = map[string]string{ocispec.AnnotationTitle: "a.json"}
	if _, err := ms.Commit(artifacts.CaptureType, cfg, []ocispec.Descriptor{octets}, nil); err != nil {
		t.Fatal(err)
	}
	media := ms.Dir()
	if err := artifacts.ValidateStage(open(media)); err == nil || err.Error() != media+`: layer a.json: mediaType "`+artifacts.MediaOctet+`", its title gives "`+artifacts.MediaJSON+`"` {
		t.Errorf("ValidateStage with a .json layer of octets = %v", err)
	}
	renamed := stageWith(t, map[string]any{"schema": 1}, "", "")
	b, err := os.ReadFile(filepath.Join(renamed, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	delete(idx.Manifests[0].Annotations, ocispec.AnnotationRefName)
	b, _ = json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(renamed, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.ValidateStage(open(renamed)); err == nil || err.Error() != renamed+`: index.json ref.name "", want "capture"` {
		t.Errorf("ValidateStage of a capture index.json does not name = %v", err)
	}
}
