package artifacts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestStore creates an empty store in a fresh temporary directory for a
// test, failing the test if it cannot.
func TestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "stage"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

// CheckStage checks the invariants every committed stage keeps, for the
// end of a stage's tests: it opens (every blob re-hashed), index.json
// names it (ref.name), every layer has the media type its title gives
// (MediaFor), and the JSON tilepipe itself writes there (the document,
// the receipt, plan.json, journal.jsonl) holds no null: a list is always
// a list.
func CheckStage(t testing.TB, dir, artifactType string) {
	t.Helper()
	st, err := OpenStage(dir, artifactType, nil)
	if err != nil {
		t.Fatalf("CheckStage: %v", err)
	}
	if got := st.Descriptor.Annotations[ocispec.AnnotationRefName]; got != StageName(artifactType) {
		t.Errorf("%s: index.json ref.name %q, want %q", dir, got, StageName(artifactType))
	}
	docs := map[string]ocispec.Descriptor{"receipt": st.Manifest.Config}
	for title, l := range st.Layers {
		if want := MediaFor(title, l.MediaType); l.MediaType != want {
			t.Errorf("%s: layer %s: mediaType %q, its title gives %q", dir, title, l.MediaType, want)
		}
		if title == DocTitle || title == "plan.json" || title == "journal.jsonl" {
			docs[title] = l
		}
	}
	for name, d := range docs {
		b, err := st.Store.ReadVerified(d.Digest, name, MaxDocBytes)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if name != "journal.jsonl" {
				line = b
			}
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				t.Fatalf("%s: %s line %d: %v", dir, name, i+1, err)
			}
			if p := nullAt(v, ""); p != "" {
				t.Errorf("%s: %s: null at %s, want a value ([] for a list)", dir, name, p)
			}
			if name != "journal.jsonl" {
				break
			}
		}
	}
}

// nullAt is the path of the first null in v, or "".
func nullAt(v any, path string) string {
	switch x := v.(type) {
	case nil:
		return path
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := nullAt(x[k], path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nullAt(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}
