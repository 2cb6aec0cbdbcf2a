package artifacts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
)

// index reads a finished stage's one manifest descriptor.
func index(t *testing.T, f finished) ocispec.Descriptor {
	t.Helper()
	st, err := artifacts.OpenStage(f.s.Dir(), artifacts.CaptureType, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st.Descriptor
}

// commitManifest stores m as the stage's manifest and writes index.json
// pointing at it, as Store.Commit does, without Commit's own manifest.
func commitManifest(t *testing.T, s *artifacts.Store, m ocispec.Manifest) {
	t.Helper()
	md, err := s.PutJSON(m, ocispec.MediaTypeImageManifest)
	if err != nil {
		t.Fatal(err)
	}
	md.ArtifactType = m.ArtifactType
	b, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{md}})
	if err != nil {
		t.Fatal(err)
	}
	if err := artifacts.WriteFileAtomic(filepath.Join(s.Dir(), "index.json"), b); err != nil {
		t.Fatal(err)
	}
}

// stageOf is a minimal stage: a receipt and one layer, as descriptors
// the test may edit before committing them by hand.
func stageOf(t *testing.T) (*artifacts.Store, ocispec.Manifest) {
	t.Helper()
	s := artifacts.TestStore(t)
	cfg, err := s.PutJSON(map[string]string{}, artifacts.MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.PutBytes([]byte("layer bytes"), artifacts.MediaOctet)
	if err != nil {
		t.Fatal(err)
	}
	return s, ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: artifacts.CaptureType, Config: cfg, Layers: []ocispec.Descriptor{artifacts.Layer("a", l)}}
}

// TestOpenStageDescriptors: a manifest, config or layer descriptor that
// does not describe its blob exactly is refused, even where every digest
// holds (a consistent re-hash with one field changed).
func TestOpenStageDescriptors(t *testing.T) {
	tests := []struct {
		name string
		// commits a stage and returns the wanted error (%[1]s: the directory)
		setup func(t *testing.T) (*artifacts.Store, string)
	}{
		{"index size", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.Size++
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, fmt.Sprintf("stage %%[1]s: index.json: manifest descriptor size %d, the manifest blob %s has %d bytes", md.Size, artifacts.Short(md.Digest), md.Size-1)
		}},
		{"index size zero", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			n := md.Size
			md.Size = 0
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, fmt.Sprintf("stage %%[1]s: index.json: manifest descriptor size 0, the manifest blob %s has %d bytes", artifacts.Short(md.Digest), n)
		}},
		{"index mediaType", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.MediaType = ocispec.MediaTypeImageIndex
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, `stage %[1]s: index.json: manifest descriptor mediaType "` + ocispec.MediaTypeImageIndex + `", want ` + ocispec.MediaTypeImageManifest
		}},
		{"index artifactType", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.ArtifactType = artifacts.ReplayType
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, `stage %[1]s: index.json: manifest descriptor artifactType "` + artifacts.ReplayType + `", the manifest says "` + artifacts.CaptureType + `"`
		}},
		{"index artifactType missing", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.ArtifactType = ""
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, `stage %[1]s: index.json: manifest descriptor artifactType "", the manifest says "` + artifacts.CaptureType + `"`
		}},
		{"index ref.name of another stage", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			if md.Annotations[ocispec.AnnotationRefName] != "capture" {
				t.Errorf("index.json annotations %v: want %s=capture", md.Annotations, ocispec.AnnotationRefName)
			}
			md.Annotations[ocispec.AnnotationRefName] = "replay"
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, `stage %[1]s: index.json: manifest descriptor annotation org.opencontainers.image.ref.name="replay": want only org.opencontainers.image.ref.name="capture" (or none)`
		}},
		{"index annotation of another kind", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.Annotations = map[string]string{"org.example.note": "x"}
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, `stage %[1]s: index.json: manifest descriptor annotation org.example.note="x": want only org.opencontainers.image.ref.name="capture" (or none)`
		}},
		{"index without ref.name (a stage written before it)", func(t *testing.T) (*artifacts.Store, string) {
			f := finishStage(t)
			md := index(t, f)
			md.Annotations = nil
			writeIndex(t, f.s.Dir(), ocispec.Index{Manifests: []ocispec.Descriptor{md}})
			return f.s, "<nil>"
		}},
		{"one blob under two titles", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			m.Layers = append(m.Layers, artifacts.Layer("b", m.Layers[0]))
			commitManifest(t, s, m)
			return s, "<nil>"
		}},
		{"one blob under two titles, sizes disagree", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			b := artifacts.Layer("b", m.Layers[0])
			b.Size = 3
			m.Layers = append(m.Layers, b)
			commitManifest(t, s, m)
			return s, fmt.Sprintf(`stage %%[1]s: manifest layers[1] "b": size 3, layer "a" of the same blob %s says 11`, artifacts.Short(b.Digest))
		}},
		{"manifest mediaType", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			m.MediaType = ocispec.MediaTypeImageIndex
			commitManifest(t, s, m)
			return s, `stage %[1]s: manifest mediaType: want ` + ocispec.MediaTypeImageManifest + `, got "` + ocispec.MediaTypeImageIndex + `"`
		}},
		{"config mediaType", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			m.Config.MediaType = artifacts.MediaJSON
			commitManifest(t, s, m)
			return s, `stage %[1]s: manifest config mediaType: want ` + artifacts.MediaStatement + ` (the receipt) or ` + sign.MediaEnvelope + ` (the receipt, signed), got "` + artifacts.MediaJSON + `"`
		}},
		{"config size", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			m.Config.Size += 3
			commitManifest(t, s, m)
			return s, fmt.Sprintf("stage %%[1]s: blob receipt (%s): size %d, descriptor says %d: digest mismatch", artifacts.Short(m.Config.Digest), m.Config.Size-3, m.Config.Size)
		}},
		{"layer size", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			m.Layers[0].Size = 5
			commitManifest(t, s, m)
			return s, fmt.Sprintf("stage %%[1]s: blob a (%s): size 11, descriptor says 5: digest mismatch", artifacts.Short(m.Layers[0].Digest))
		}},
		{"layer size zero", func(t *testing.T) (*artifacts.Store, string) {
			// Store.Verify skips a zero size (unknown); a stage's layer
			// descriptors always know theirs.
			s, m := stageOf(t)
			m.Layers[0].Size = 0
			commitManifest(t, s, m)
			return s, fmt.Sprintf("stage %%[1]s: blob a (%s): size 11, descriptor says 0: digest mismatch", artifacts.Short(m.Layers[0].Digest))
		}},
		{"consistent", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			commitManifest(t, s, m)
			return s, "<nil>"
		}},
		{"empty layer", func(t *testing.T) (*artifacts.Store, string) {
			s, m := stageOf(t)
			e, err := s.PutBytes(nil, artifacts.MediaText)
			if err != nil {
				t.Fatal(err)
			}
			m.Layers = append(m.Layers, artifacts.Layer("empty", e))
			commitManifest(t, s, m)
			return s, "<nil>"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, want := tt.setup(t)
			want = format(want, s.Dir())
			_, err := artifacts.OpenStage(s.Dir(), artifacts.CaptureType, nil)
			if errString(err) != want {
				t.Errorf("OpenStage(%s) = %v, want %s", tt.name, err, want)
			}
		})
	}
}

// put writes a read-only file, as a blob would be.
func put(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestOpenStageUnlistedBlobs: whatever blobs/ holds besides the manifest,
// its config and its layers is named, a file or not; files beside blobs/
// are not looked at.
func TestOpenStageUnlistedBlobs(t *testing.T) {
	hex := func(c byte) string { return strings.Repeat(string(c), 64) }
	tests := []struct {
		name  string
		setup func(t *testing.T, f finished) string // the wanted error, %[1]s the directory
	}{
		{"blob put after commit", func(t *testing.T, f finished) string {
			d, err := f.s.PutBytes([]byte("smuggled"), artifacts.MediaOctet)
			if err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs/sha256/" + d.Digest.Encoded() + ": not listed in the manifest"
		}},
		{"file not named by a digest", func(t *testing.T, f finished) string {
			put(t, filepath.Join(f.s.Dir(), "blobs", "sha256", "notes.txt"), []byte("x"))
			return "stage %[1]s: blobs/sha256/notes.txt: not listed in the manifest"
		}},
		{"two files", func(t *testing.T, f finished) string {
			put(t, filepath.Join(f.s.Dir(), "blobs", "sha256", hex('a')), []byte("a"))
			put(t, filepath.Join(f.s.Dir(), "blobs", "sha256", hex('b')), []byte("b"))
			return "stage %[1]s: blobs/sha256/" + hex('a') + ": not listed in the manifest; blobs/sha256/" + hex('b') + ": not listed in the manifest"
		}},
		{"many files", func(t *testing.T, f finished) string {
			var want []string
			for c := byte('0'); c <= '9'; c++ {
				put(t, filepath.Join(f.s.Dir(), "blobs", "sha256", hex(c)), []byte{c})
				want = append(want, "blobs/sha256/"+hex(c)+": not listed in the manifest")
			}
			for c := byte('a'); c <= 'b'; c++ {
				put(t, filepath.Join(f.s.Dir(), "blobs", "sha256", hex(c)), []byte{c})
			}
			return "stage %[1]s: " + strings.Join(want, "; ") + "; and 2 more"
		}},
		{"temp file beside sha256", func(t *testing.T, f finished) string {
			put(t, filepath.Join(f.s.Dir(), "blobs", ".tmp-123"), []byte("half a blob"))
			return "stage %[1]s: blobs/.tmp-123: not listed in the manifest"
		}},
		{"other algorithm", func(t *testing.T, f finished) string {
			if err := os.Mkdir(filepath.Join(f.s.Dir(), "blobs", "sha512"), 0o755); err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs/sha512: a directory, not a blob"
		}},
		{"directory", func(t *testing.T, f finished) string {
			if err := os.Mkdir(filepath.Join(f.s.Dir(), "blobs", "sha256", hex('c')), 0o755); err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs/sha256/" + hex('c') + ": a directory, not a blob"
		}},
		{"symlink", func(t *testing.T, f finished) string {
			if err := os.Symlink(f.s.Path(f.named.Digest), filepath.Join(f.s.Dir(), "blobs", "sha256", hex('d'))); err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs/sha256/" + hex('d') + ": not a regular file (mode Lrwxrwxrwx)"
		}},
		{"layer replaced by a symlink", func(t *testing.T, f finished) string {
			p := f.s.Path(f.named.Digest)
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs/sha256/" + f.named.Digest.Encoded() + ": not a regular file (mode Lrwxrwxrwx); blobs/sha256/" + f.named.Digest.Encoded() + ".real: not listed in the manifest"
		}},
		{"blobs a symlink", func(t *testing.T, f finished) string {
			b := filepath.Join(f.s.Dir(), "blobs")
			if err := os.Rename(b, b+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("blobs.real", b); err != nil {
				t.Fatal(err)
			}
			return "stage %[1]s: blobs: not a directory (mode Lrwxrwxrwx)"
		}},
		{"files beside blobs", func(t *testing.T, f finished) string {
			for _, n := range []string{"plan.json", "journal.jsonl", "lock"} {
				put(t, filepath.Join(f.s.Dir(), n), []byte("{}"))
			}
			return "<nil>"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := finishStage(t)
			want := format(tt.setup(t, f), f.s.Dir())
			_, err := artifacts.OpenStage(f.s.Dir(), artifacts.CaptureType, nil)
			if errString(err) != want {
				t.Errorf("OpenStage(%s) = %v, want %s", tt.name, err, want)
			}
		})
	}
}
