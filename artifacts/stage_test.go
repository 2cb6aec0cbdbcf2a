package artifacts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
)

type testDoc struct {
	Schema int    `json:"schema"`
	Note   string `json:"note"`
}

// finished is a committed test stage: one named blob, one unnamed blob and
// the document.
type finished struct {
	s        *artifacts.Store
	manifest ocispec.Descriptor
	named    ocispec.Descriptor // titled "data/a.bin"
	unnamed  ocispec.Descriptor
}

func finishStage(t *testing.T) finished {
	t.Helper()
	s := artifacts.TestStore(t)
	named, err := s.PutBytes([]byte("named layer"), artifacts.MediaOctet)
	if err != nil {
		t.Fatal(err)
	}
	s.Name("data/a.bin", named)
	unnamed, err := s.PutBytes([]byte("unnamed layer"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	r := artifacts.Receipt{Stage: "test", Tool: artifacts.ToolInfo(), Parameters: map[string]any{"k": "v"}}
	md, err := s.Finish(artifacts.CaptureType, testDoc{Schema: 1, Note: "hi"}, r, nil, nil)
	if err != nil {
		t.Fatalf("Finish = %v, want nil", err)
	}
	return finished{s: s, manifest: md, named: named, unnamed: unnamed}
}

func TestFinishOpenStageRoundTrip(t *testing.T) {
	f := finishStage(t)
	dir := f.s.Dir()
	calls := map[string]int{}
	verifiedDigests := map[string]artifacts.Digest{}
	st, err := artifacts.OpenStage(dir, artifacts.CaptureType, func(name string, d ocispec.Descriptor) {
		calls[name]++
		verifiedDigests[name] = d.Digest
	})
	if err != nil {
		t.Fatalf("OpenStage(%s) = %v, want nil", dir, err)
	}
	if !reflect.DeepEqual(st.Descriptor, f.manifest) {
		t.Errorf("OpenStage descriptor = %+v, want %+v (from Finish)", st.Descriptor, f.manifest)
	}
	if st.Descriptor.ArtifactType != artifacts.CaptureType || st.Manifest.ArtifactType != artifacts.CaptureType {
		t.Errorf("artifactType = %q (index), %q (manifest), want %s", st.Descriptor.ArtifactType, st.Manifest.ArtifactType, artifacts.CaptureType)
	}
	if st.Manifest.Subject != nil {
		t.Errorf("manifest subject = %+v, want none", st.Manifest.Subject)
	}
	if st.Manifest.Config.MediaType != artifacts.MediaStatement {
		t.Errorf("manifest config mediaType = %s, want %s", st.Manifest.Config.MediaType, artifacts.MediaStatement)
	}

	unnamedTitle := "blobs/" + f.unnamed.Digest.Encoded()
	wantTitles := []string{unnamedTitle, "data/a.bin", artifacts.DocTitle}
	if got := st.Titles(); !reflect.DeepEqual(got, wantTitles) {
		t.Errorf("Titles() = %v, want %v", got, wantTitles)
	}
	for i, l := range st.Manifest.Layers {
		if i > 0 && st.Manifest.Layers[i-1].Annotations[artifacts.AnnotationTitle] >= l.Annotations[artifacts.AnnotationTitle] {
			t.Errorf("manifest layers not sorted by title at %d", i)
		}
	}
	if got, _ := st.Layer("data/a.bin"); got.Digest != f.named.Digest || got.MediaType != artifacts.MediaOctet {
		t.Errorf("Layer(data/a.bin) = %+v, want digest %s, mediaType %s", got, f.named.Digest, artifacts.MediaOctet)
	}
	if _, err := st.Layer("nope"); err == nil || err.Error() != fmt.Sprintf(`stage %s: layer "nope": blob not found`, dir) {
		t.Errorf(`Layer("nope") = %v, want stage %s: layer "nope": blob not found`, err, dir)
	}
	if !st.Has(f.unnamed.Digest) || st.Has(f.manifest.Digest) {
		t.Errorf("Has(unnamed), Has(manifest) = %v, %v, want true, false", st.Has(f.unnamed.Digest), st.Has(f.manifest.Digest))
	}

	// The verified callback sees each blob exactly once.
	wantCalls := map[string]int{"manifest": 1, "receipt": 1}
	for _, title := range wantTitles {
		wantCalls[title] = 1
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("verified calls = %v, want %v", calls, wantCalls)
	}
	if verifiedDigests["manifest"] != f.manifest.Digest || verifiedDigests["receipt"] != st.Manifest.Config.Digest {
		t.Errorf("verified digests = %v, want manifest %s and receipt %s", verifiedDigests, f.manifest.Digest, st.Manifest.Config.Digest)
	}

	var doc testDoc
	if err := st.ReadDoc(&doc); err != nil || doc != (testDoc{1, "hi"}) {
		t.Errorf("ReadDoc = %+v, %v, want {1 hi}, nil", doc, err)
	}

	rec, err := st.Receipt()
	if err != nil {
		t.Fatalf("Receipt() = %v", err)
	}
	if rec.Type != artifacts.StatementType || rec.PredicateType != artifacts.ReceiptPredicate {
		t.Errorf("Receipt() _type, predicateType = %s, %s, want %s, %s", rec.Type, rec.PredicateType, artifacts.StatementType, artifacts.ReceiptPredicate)
	}
	var wantSubjects []artifacts.Subject
	for _, l := range st.Manifest.Layers {
		wantSubjects = append(wantSubjects, artifacts.Subject{Name: l.Annotations[artifacts.AnnotationTitle], Digest: map[string]string{"sha256": l.Digest.Encoded()}})
	}
	if !reflect.DeepEqual(rec.Subject, wantSubjects) {
		t.Errorf("Receipt() subject = %+v, want one per layer %+v", rec.Subject, wantSubjects)
	}
	if rec.Predicate.Stage != "test" || rec.Predicate.FinishedOn.IsZero() || rec.Predicate.Parameters["k"] != "v" {
		t.Errorf("Receipt() predicate = %+v, want stage test, parameters k=v and a finish time", rec.Predicate)
	}

	// The raw receipt uses the in-toto field names.
	raw, err := f.s.ReadVerified(st.Manifest.Config.Digest, "receipt", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_type", "subject", "predicateType", "predicate"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("receipt JSON lacks %q: %s", k, raw)
		}
	}
}

func TestFinishChainsSubject(t *testing.T) {
	first := finishStage(t)
	s := artifacts.TestStore(t)
	md, err := s.Finish(artifacts.PreparedType, testDoc{Schema: 1}, artifacts.Receipt{Stage: "second"}, &first.manifest, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := artifacts.OpenStage(s.Dir(), artifacts.PreparedType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Manifest.Subject == nil || st.Manifest.Subject.Digest != first.manifest.Digest {
		t.Errorf("OpenStage(second).Manifest.Subject = %+v, want digest %s", st.Manifest.Subject, first.manifest.Digest)
	}
	if md.Digest != st.Descriptor.Digest {
		t.Errorf("Finish = %s, OpenStage descriptor = %s, want equal", md.Digest, st.Descriptor.Digest)
	}
}

// Two different blobs named with one title would make a manifest that
// OpenStage refuses; Finish must refuse it first.
func TestFinishRefusesDuplicateTitle(t *testing.T) {
	s := artifacts.TestStore(t)
	for _, c := range []string{"one", "two"} {
		d, err := s.PutBytes([]byte(c), artifacts.MediaText)
		if err != nil {
			t.Fatal(err)
		}
		s.Name("same.txt", d)
	}
	_, err := s.Finish(artifacts.CaptureType, testDoc{}, artifacts.Receipt{}, nil, nil)
	want := `finish stage: layers[1]: duplicate title "same.txt"`
	if errString(err) != want {
		t.Errorf("Finish(two blobs titled same.txt) = %v, want %s", err, want)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), "index.json")); !os.IsNotExist(err) {
		t.Errorf("index.json after refused Finish: %v, want it absent", err)
	}
}

func writeIndex(t *testing.T, dir string, idx any) {
	t.Helper()
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, filepath.Join(dir, "index.json"), b)
}

// commitRaw commits a stage whose layers are given as is, bypassing Finish.
func commitRaw(t *testing.T, s *artifacts.Store, layers ...ocispec.Descriptor) {
	t.Helper()
	cfg, err := s.PutJSON(map[string]string{}, artifacts.MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(artifacts.CaptureType, cfg, layers, nil); err != nil {
		t.Fatal(err)
	}
}

func TestOpenStageViolations(t *testing.T) {
	tests := []struct {
		name string
		// breaks the finished stage; returns the wanted error with %[1]s
		// for the directory.
		setup        func(t *testing.T, f finished) string
		artifactType string
	}{
		{
			name:         "wrong artifact type",
			artifactType: artifacts.ReplayType,
			setup: func(t *testing.T, f finished) string {
				return `stage %[1]s: manifest artifactType: want ` + artifacts.ReplayType + `, got "` + artifacts.CaptureType + `"`
			},
		},
		{
			name: "tampered layer",
			setup: func(t *testing.T, f finished) string {
				tamper(t, f.s.Path(f.named.Digest), []byte("forged layer"))
				return fmt.Sprintf("stage %%[1]s: blob data/a.bin (%s): digest mismatch: expected %s, actual %s", f.s.Path(f.named.Digest), f.named.Digest, digest.FromString("forged layer"))
			},
		},
		{
			name: "missing layer",
			setup: func(t *testing.T, f finished) string {
				if err := os.Remove(f.s.Path(f.unnamed.Digest)); err != nil {
					t.Fatal(err)
				}
				title := "blobs/" + f.unnamed.Digest.Encoded()
				return fmt.Sprintf("stage %%[1]s: blob %s (%s): %s: blob not found", title, artifacts.Short(f.unnamed.Digest), f.s.Path(f.unnamed.Digest))
			},
		},
		{
			name: "tampered receipt",
			setup: func(t *testing.T, f finished) string {
				st, err := artifacts.OpenStage(f.s.Dir(), artifacts.CaptureType, nil)
				if err != nil {
					t.Fatal(err)
				}
				cfg := st.Manifest.Config.Digest
				tamper(t, f.s.Path(cfg), []byte("{}"))
				return fmt.Sprintf("stage %%[1]s: blob receipt (%s): digest mismatch: expected %s, actual %s", f.s.Path(cfg), cfg, digest.FromString("{}"))
			},
		},
		{
			name: "tampered manifest",
			setup: func(t *testing.T, f finished) string {
				tamper(t, f.s.Path(f.manifest.Digest), []byte("{}"))
				return fmt.Sprintf("stage %%[1]s: blob manifest (%s): digest mismatch: expected %s, actual %s", f.s.Path(f.manifest.Digest), f.manifest.Digest, digest.FromString("{}"))
			},
		},
		{
			name: "index.json with two manifests",
			setup: func(t *testing.T, f finished) string {
				writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{f.manifest, f.manifest}})
				return "stage %[1]s: index.json: manifests: want exactly 1, got 2"
			},
		},
		{
			name: "index.json with no manifest",
			setup: func(t *testing.T, f finished) string {
				writeIndex(t, f.s.Dir(), ocispec.Index{})
				return "stage %[1]s: index.json: manifests: want exactly 1, got 0"
			},
		},
		{
			name: "index.json with an unknown field",
			setup: func(t *testing.T, f finished) string {
				writeIndex(t, f.s.Dir(), map[string]any{"manifests": []ocispec.Descriptor{f.manifest}, "extra": 1})
				return `stage %[1]s: index.json: json: unknown field "extra"`
			},
		},
		{
			name: "index.json a symlink",
			setup: func(t *testing.T, f finished) string {
				p := filepath.Join(f.s.Dir(), "index.json")
				if err := os.Rename(p, p+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("index.json.real", p); err != nil {
					t.Fatal(err)
				}
				return "stage %[1]s: %[1]s/index.json: not a regular file (mode Lrwxrwxrwx): blob not found"
			},
		},
		{
			name: "index.json missing",
			setup: func(t *testing.T, f finished) string {
				if err := os.Remove(filepath.Join(f.s.Dir(), "index.json")); err != nil {
					t.Fatal(err)
				}
				return "open stage %[1]s: index.json missing: the stage did not finish (incomplete or interrupted)"
			},
		},
		{
			name: "manifest digest not sha256",
			setup: func(t *testing.T, f finished) string {
				m := f.manifest
				m.Digest = "sha256:../../oci-layout"
				writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{m}})
				return `stage %[1]s: blob manifest: digest "sha256:../../oci-layout": invalid checksum digest length`
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := finishStage(t)
			want := format(tt.setup(t, f), f.s.Dir())
			typ := tt.artifactType
			if typ == "" {
				typ = artifacts.CaptureType
			}
			_, err := artifacts.OpenStage(f.s.Dir(), typ, nil)
			if errString(err) != want {
				t.Errorf("OpenStage(%s) = %v, want %s", tt.name, err, want)
			}
		})
	}
}

func TestOpenStageLayerTitles(t *testing.T) {
	tests := []struct {
		name   string
		titles []string // "" leaves the annotation out
		want   string   // %[1]s is the directory
	}{
		{"no title", []string{""}, "stage %[1]s: manifest layers[0]: missing org.opencontainers.image.title annotation"},
		{"second without title", []string{"a", ""}, "stage %[1]s: manifest layers[1]: missing org.opencontainers.image.title annotation"},
		{"duplicate titles", []string{"x", "x"}, `stage %[1]s: manifest layers[1]: duplicate title "x"`},
		{"distinct titles", []string{"x", "y"}, "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := artifacts.TestStore(t)
			var layers []ocispec.Descriptor
			for i, title := range tt.titles {
				d, err := s.PutBytes([]byte{byte(i)}, artifacts.MediaOctet)
				if err != nil {
					t.Fatal(err)
				}
				if title != "" {
					d = artifacts.Layer(title, d)
				}
				layers = append(layers, d)
			}
			commitRaw(t, s, layers...)
			_, err := artifacts.OpenStage(s.Dir(), artifacts.CaptureType, nil)
			if want := format(tt.want, s.Dir()); errString(err) != want {
				t.Errorf("OpenStage(layers titled %q) = %v, want %s", tt.titles, err, want)
			}
		})
	}
}

func TestDeps(t *testing.T) {
	var d artifacts.Deps
	a := ocispec.Descriptor{Digest: digest.FromString("a")}
	d.Verified("a", a)
	d.Verified("b", ocispec.Descriptor{Digest: digest.FromString("b")})
	l := d.List()
	if len(l) != 2 || l[0].Name != "a" || l[0].Digest != a.Digest || l[0].VerifiedAt.IsZero() || l[1].Name != "b" {
		t.Errorf("Deps.List() = %+v, want a then b with verification times", l)
	}
}

// TestDependencyJSON: a dependency is written as an in-toto
// ResourceDescriptor (a digest map, verifiedAt as an annotation), reads
// back the same, and a receipt written before that (the digest a string)
// still reads; a digest map of another shape is refused.
func TestDependencyJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d := artifacts.Dependency{Name: "capture manifest", Digest: digest.FromString("a"), VerifiedAt: at}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"capture manifest","digest":{"sha256":"` + digest.FromString("a").Encoded() + `"},"annotations":{"verifiedAt":"2026-12-01T12:00:00Z"}}`
	if string(b) != want {
		t.Errorf("json.Marshal(Dependency) = %s, want %s", b, want)
	}
	for _, in := range []string{want, `{"name":"capture manifest","digest":"` + string(digest.FromString("a")) + `","verifiedAt":"2026-12-01T12:00:00Z"}`} {
		var got artifacts.Dependency
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != d {
			t.Errorf("json.Unmarshal(%s) = %+v, %v, want %+v", in, got, err, d)
		}
	}
	hex := digest.FromString("a").Encoded()
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x","digest":{"sha512":"` + hex + `"},"annotations":{"verifiedAt":"2026-12-01T12:00:00Z"}}`, `dependency "x": digest map[sha512:` + hex + `]: want exactly {"sha256": HEX}`},
		{`{"name":"x","digest":{"sha256":"` + hex + `","md5":"00"},"annotations":{"verifiedAt":"2026-12-01T12:00:00Z"}}`, `dependency "x": digest map[md5:00 sha256:` + hex + `]: want exactly {"sha256": HEX}`},
		{`{"name":"x","digest":{"sha256":"zz"},"annotations":{"verifiedAt":"2026-12-01T12:00:00Z"}}`, `dependency "x": parse digest "sha256:zz": invalid checksum digest length`},
		{`{"name":"x","digest":"","verifiedAt":"2026-12-01T12:00:00Z"}`, `dependency "x": parse digest "": invalid checksum digest format`},
		{`{"name":"x","digest":{"sha256":"` + hex + `"},"uri":"http://x"}`, `dependency: json: unknown field "uri"`},
	} {
		var got artifacts.Dependency
		if err := json.Unmarshal([]byte(tc.in), &got); errString(err) != tc.want {
			t.Errorf("json.Unmarshal(%s) = %v, want %s", tc.in, err, tc.want)
		}
	}
}

// TestFinishSigned: with a key, the receipt is the manifest's config as a
// DSSE envelope; the stage opens, its receipt reads from the envelope, and
// the envelope verifies with the key's public half only.
func TestFinishSigned(t *testing.T) {
	k, err := sign.Generate(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	s := artifacts.TestStore(t)
	if _, err := s.Finish(artifacts.CaptureType, testDoc{Schema: 1, Note: "signed"}, artifacts.Receipt{Stage: "capture"}, nil, k); err != nil {
		t.Fatal(err)
	}
	st, err := artifacts.OpenStage(s.Dir(), artifacts.CaptureType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Manifest.Config.MediaType != sign.MediaEnvelope {
		t.Errorf("config mediaType %q, want %s", st.Manifest.Config.MediaType, sign.MediaEnvelope)
	}
	r, err := st.Receipt()
	if err != nil || r.Predicate.Stage != "capture" || len(r.Subject) == 0 {
		t.Errorf("Receipt() = %+v, %v; want the signed capture receipt", r, err)
	}
	env, _, err := st.Envelope()
	if err != nil || env == nil {
		t.Fatalf("Envelope() = %v, %v", env, err)
	}
	if p, err := sign.Verify(env, []sign.Public{k.Public()}); err != nil || p.ID != k.Public().ID {
		t.Errorf("Verify = %+v, %v; want key %s", p, err, k.Public().ID)
	}
	other, err := sign.Generate(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Verify(env, []sign.Public{other.Public()}); err == nil {
		t.Error("Verify with another key passed")
	}
}
