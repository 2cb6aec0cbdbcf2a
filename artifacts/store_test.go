package artifacts_test

import (
	"bytes"
	_ "crypto/sha512" // makes sha512 a known algorithm, so ParseDigest's own check is reached
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
)

// tamper replaces the bytes of a read-only file in place.
func tamper(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tempFiles lists the leftover temp files of a store.
func tempFiles(t *testing.T, s *artifacts.Store) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{s.Dir(), filepath.Join(s.Dir(), "blobs"), filepath.Join(s.Dir(), "blobs", "sha256")} {
		m, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

func blobCount(t *testing.T, s *artifacts.Store) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Dir(), "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// format is fmt.Sprintf for wanted messages that may use no argument.
func format(f string, args ...any) string {
	if !strings.Contains(f, "%") {
		return f
	}
	return fmt.Sprintf(f, args...)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestCreateRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	_, err := artifacts.Create(dir)
	want := fmt.Sprintf("output directory %s already exists; stages never overwrite, choose a new one", dir)
	if errString(err) != want {
		t.Errorf("Create(%s) = %v, want %s", dir, err, want)
	}
	missingParent := filepath.Join(dir, "no", "such")
	if _, err := artifacts.Create(missingParent); err == nil || !strings.HasPrefix(err.Error(), "create output directory: ") {
		t.Errorf("Create(%s) = %v, want create output directory: ...", missingParent, err)
	}
}

func TestCreateLayout(t *testing.T) {
	s := artifacts.TestStore(t)
	b, err := os.ReadFile(filepath.Join(s.Dir(), ocispec.ImageLayoutFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"imageLayoutVersion":"1.0.0"}`; got != want {
		t.Errorf("oci-layout = %s, want %s", got, want)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), "blobs", "sha256")); err != nil || !fi.IsDir() {
		t.Errorf("blobs/sha256: %v, want a directory", err)
	}
	if _, err := artifacts.OpenIncomplete(s.Dir()); err != nil {
		t.Errorf("OpenIncomplete(new store) = %v, want nil", err)
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // dir is a fresh, uncommitted store
		want  string                         // %[1]s is the directory
	}{
		{
			name:  "no index.json",
			setup: func(t *testing.T, dir string) {},
			want:  "open stage %[1]s: index.json missing: the stage did not finish (incomplete or interrupted)",
		},
		{
			name: "no oci-layout",
			setup: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "oci-layout")); err != nil {
					t.Fatal(err)
				}
			},
			want: "open stage %[1]s: %[1]s/oci-layout: blob not found",
		},
		{
			name: "wrong layout version",
			setup: func(t *testing.T, dir string) {
				tamper(t, filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"2.0.0"}`))
			},
			want: `open stage %[1]s: oci-layout: want imageLayoutVersion "1.0.0"`,
		},
		{
			name: "layout not JSON",
			setup: func(t *testing.T, dir string) {
				tamper(t, filepath.Join(dir, "oci-layout"), []byte(`not json`))
			},
			want: `open stage %[1]s: oci-layout: want imageLayoutVersion "1.0.0"`,
		},
		{
			name: "layout is a symlink",
			setup: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "oci-layout")
				if err := os.Rename(p, p+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p+".real", p); err != nil {
					t.Fatal(err)
				}
			},
			want: "open stage %[1]s: %[1]s/oci-layout: not a regular file (mode Lrwxrwxrwx): blob not found",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := artifacts.TestStore(t)
			tt.setup(t, s.Dir())
			_, err := artifacts.Open(s.Dir())
			if want := format(tt.want, s.Dir()); errString(err) != want {
				t.Errorf("Open(%s) = %v, want %s", s.Dir(), err, want)
			}
		})
	}
	t.Run("not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := artifacts.Open(f)
		if want := fmt.Sprintf("open stage %s: not a directory", f); errString(err) != want {
			t.Errorf("Open(%s) = %v, want %s", f, err, want)
		}
	})
}

func TestPutRoundTrip(t *testing.T) {
	content := []byte("hello, store\n")
	tests := []struct {
		name string
		put  func(t *testing.T, s *artifacts.Store) (ocispec.Descriptor, error)
	}{
		{"Put", func(t *testing.T, s *artifacts.Store) (ocispec.Descriptor, error) {
			return s.Put(bytes.NewReader(content), artifacts.MediaText)
		}},
		{"PutBytes", func(t *testing.T, s *artifacts.Store) (ocispec.Descriptor, error) {
			return s.PutBytes(content, artifacts.MediaText)
		}},
		{"PutFile", func(t *testing.T, s *artifacts.Store) (ocispec.Descriptor, error) {
			p := filepath.Join(t.TempDir(), "in.txt")
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			return s.PutFile(p, artifacts.MediaText)
		}},
		{"Writer", func(t *testing.T, s *artifacts.Store) (ocispec.Descriptor, error) {
			w, err := s.NewWriter(artifacts.MediaText)
			if err != nil {
				return ocispec.Descriptor{}, err
			}
			for _, part := range bytes.SplitAfter(content, []byte(",")) {
				if _, err := w.Write(part); err != nil {
					return ocispec.Descriptor{}, err
				}
			}
			return w.Commit()
		}},
	}
	want := ocispec.Descriptor{MediaType: artifacts.MediaText, Digest: digest.FromBytes(content), Size: int64(len(content))}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := artifacts.TestStore(t)
			got, err := tt.put(t, s)
			if err != nil {
				t.Fatalf("%s = %v, want nil error", tt.name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s = %+v, want %+v", tt.name, got, want)
			}
			fi, err := os.Lstat(s.Path(got.Digest))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o444 {
				t.Errorf("mode of blob %s = %s, want -r--r--r--", artifacts.Short(got.Digest), fi.Mode())
			}
			b, err := s.ReadVerified(got.Digest, "hello", 1<<10)
			if err != nil || !bytes.Equal(b, content) {
				t.Errorf("ReadVerified(%s) = %q, %v, want %q, nil", artifacts.Short(got.Digest), b, err, content)
			}
			if err := s.Verify(got, "hello"); err != nil {
				t.Errorf("Verify(%s) = %v, want nil", artifacts.Short(got.Digest), err)
			}
			if tmp := tempFiles(t, s); len(tmp) != 0 {
				t.Errorf("temp files after %s = %v, want none", tt.name, tmp)
			}
		})
	}
}

func TestPutJSON(t *testing.T) {
	s := artifacts.TestStore(t)
	d, err := s.PutJSON(map[string]int{"a": 1}, artifacts.MediaJSON)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": 1\n}\n"
	b, err := s.ReadVerified(d.Digest, "doc", 1<<10)
	if err != nil || string(b) != want {
		t.Errorf("ReadVerified(PutJSON({a:1})) = %q, %v, want %q", b, err, want)
	}
	if _, err := s.PutJSON(func() {}, artifacts.MediaJSON); err == nil {
		t.Errorf("PutJSON(func) = nil error, want an error")
	}
}

func TestPutFileRefusesSymlink(t *testing.T) {
	s := artifacts.TestStore(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(real, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutFile(link, artifacts.MediaOctet)
	want := link + ": not a regular file (mode Lrwxrwxrwx): blob not found"
	if errString(err) != want {
		t.Errorf("PutFile(symlink) = %v, want %s", err, want)
	}
	_, err = s.PutFile(filepath.Join(dir, "missing"), artifacts.MediaOctet)
	if !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("PutFile(missing) = %v, want an error matching ErrNotFound", err)
	}
}

func TestPutStoresEqualContentOnce(t *testing.T) {
	s := artifacts.TestStore(t)
	d1, err := s.PutBytes([]byte("same"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := s.PutBytes([]byte("same"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d1, d2) {
		t.Errorf("PutBytes(same) twice = %+v and %+v, want equal descriptors", d1, d2)
	}
	if n := blobCount(t, s); n != 1 {
		t.Errorf("blobs after storing equal content twice = %d, want 1", n)
	}
	if tmp := tempFiles(t, s); len(tmp) != 0 {
		t.Errorf("temp files = %v, want none", tmp)
	}
}

// Storing content that is already present re-verifies the copy on disk, so
// a tampered blob is not silently accepted as the new one.
func TestPutOverTamperedBlob(t *testing.T) {
	s := artifacts.TestStore(t)
	d, err := s.PutBytes([]byte("original"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, s.Path(d.Digest), []byte("forged"))
	_, err = s.PutBytes([]byte("original"), artifacts.MediaText)
	want := fmt.Sprintf("blob existing blob (%s): digest mismatch: expected %s, actual %s", s.Path(d.Digest), d.Digest, digest.FromString("forged"))
	if errString(err) != want {
		t.Errorf("PutBytes(over tampered) = %v, want %s", err, want)
	}
	if tmp := tempFiles(t, s); len(tmp) != 0 {
		t.Errorf("temp files = %v, want none", tmp)
	}
}

func TestWriterAbort(t *testing.T) {
	s := artifacts.TestStore(t)
	w, err := s.NewWriter(artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if tmp := tempFiles(t, s); len(tmp) != 1 {
		t.Errorf("temp files while writing = %v, want one", tmp)
	}
	w.Abort()
	w.Abort() // idempotent
	if tmp := tempFiles(t, s); len(tmp) != 0 {
		t.Errorf("temp files after Abort = %v, want none", tmp)
	}
	if n := blobCount(t, s); n != 0 {
		t.Errorf("blobs after Abort = %d, want 0", n)
	}
	_, err = w.Commit()
	if want := "blob writer already finished"; errString(err) != want {
		t.Errorf("Commit after Abort = %v, want %s", err, want)
	}
}

func TestVerify(t *testing.T) {
	content := []byte("payload")
	good := digest.FromBytes(content)
	tests := []struct {
		name string
		// setup breaks the stored blob of content and returns the descriptor
		// to verify.
		setup    func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor
		want     string // %[1]s is the blob path, %[2]s its short digest
		wantIs   error
		mismatch *artifacts.MismatchError
	}{
		{
			name:  "intact",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor { return d },
			want:  "<nil>",
		},
		{
			name: "bytes changed on disk",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				tamper(t, s.Path(d.Digest), []byte("PAYLOAD"))
				return d
			},
			want:     "blob data/p (%[1]s): digest mismatch: expected " + string(good) + ", actual " + string(digest.FromString("PAYLOAD")),
			wantIs:   artifacts.ErrDigestMismatch,
			mismatch: &artifacts.MismatchError{Name: "data/p", Expected: good, Actual: digest.FromString("PAYLOAD")},
		},
		{
			name: "missing",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				if err := os.Remove(s.Path(d.Digest)); err != nil {
					t.Fatal(err)
				}
				return d
			},
			want:   "blob data/p (%[2]s): %[1]s: blob not found",
			wantIs: artifacts.ErrNotFound,
		},
		{
			name: "symlink to the right bytes",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				p := s.Path(d.Digest)
				elsewhere := filepath.Join(t.TempDir(), "payload")
				if err := os.WriteFile(elsewhere, content, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(elsewhere, p); err != nil {
					t.Fatal(err)
				}
				return d
			},
			want:   "blob data/p (%[2]s): %[1]s: not a regular file (mode Lrwxrwxrwx): blob not found",
			wantIs: artifacts.ErrNotFound,
		},
		{
			name: "directory in place of the blob",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				p := s.Path(d.Digest)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				return d
			},
			want:   "blob data/p (%[2]s): %[1]s: not a regular file (mode drwxr-xr-x): blob not found",
			wantIs: artifacts.ErrNotFound,
		},
		{
			name: "descriptor size too large",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				d.Size++
				return d
			},
			want:   "blob data/p (%[2]s): size 7, descriptor says 8: digest mismatch",
			wantIs: artifacts.ErrDigestMismatch,
		},
		{
			name: "descriptor size negative",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				d.Size = -1
				return d
			},
			want:   "blob data/p (%[2]s): size 7, descriptor says -1: digest mismatch",
			wantIs: artifacts.ErrDigestMismatch,
		},
		{
			name: "sha512 descriptor",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				d.Digest = digest.SHA512.FromBytes(content)
				return d
			},
			want: `blob data/p: digest "` + string(digest.SHA512.FromBytes(content)) + `": want sha256:<64 hex>`,
		},
		{
			name: "path traversal in digest",
			setup: func(t *testing.T, s *artifacts.Store, d ocispec.Descriptor) ocispec.Descriptor {
				d.Digest = "sha256:../../../../etc/passwd"
				return d
			},
			want: `blob data/p: digest "sha256:../../../../etc/passwd": want sha256:<64 hex>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := artifacts.TestStore(t)
			d, err := s.PutBytes(content, artifacts.MediaOctet)
			if err != nil {
				t.Fatal(err)
			}
			d = tt.setup(t, s, d)
			err = s.Verify(d, "data/p")
			want := format(tt.want, s.Path(good), artifacts.Short(good))
			if errString(err) != want {
				t.Errorf("Verify(%s) = %v, want %s", tt.name, err, want)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Verify(%s) = %v, want an error matching %v", tt.name, err, tt.wantIs)
			}
			if tt.mismatch != nil {
				var me *artifacts.MismatchError
				if !errors.As(err, &me) {
					t.Fatalf("Verify(%s) = %T, want *MismatchError", tt.name, err)
				}
				tt.mismatch.Path = s.Path(good)
				if *me != *tt.mismatch {
					t.Errorf("Verify(%s) = %+v, want %+v", tt.name, *me, *tt.mismatch)
				}
			}
		})
	}
}

func TestReadVerified(t *testing.T) {
	s := artifacts.TestStore(t)
	d, err := s.PutBytes([]byte("abcdef"), artifacts.MediaOctet)
	if err != nil {
		t.Fatal(err)
	}
	other := digest.FromString("absent")
	tests := []struct {
		name  string
		d     artifacts.Digest
		limit int64
		want  string
	}{
		{"exactly at limit", d.Digest, 6, "<nil>"},
		{"over limit", d.Digest, 5, fmt.Sprintf("blob x (%s): %s: larger than the 5-byte limit", artifacts.Short(d.Digest), s.Path(d.Digest))},
		{"missing", other, 100, fmt.Sprintf("blob x (%s): %s: blob not found", artifacts.Short(other), s.Path(other))},
		{"malformed digest", "sha256:zz", 100, `blob x: digest "sha256:zz": invalid checksum digest length`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ReadVerified(tt.d, "x", tt.limit)
			if errString(err) != tt.want {
				t.Errorf("ReadVerified(%s, %d) = %v, want %s", tt.d, tt.limit, err, tt.want)
			}
		})
	}
	t.Run("bytes changed on disk", func(t *testing.T) {
		tamper(t, s.Path(d.Digest), []byte("abcdeF"))
		_, err := s.ReadVerified(d.Digest, "x", 100)
		want := fmt.Sprintf("blob x (%s): digest mismatch: expected %s, actual %s", s.Path(d.Digest), d.Digest, digest.FromString("abcdeF"))
		if errString(err) != want || !errors.Is(err, artifacts.ErrDigestMismatch) {
			t.Errorf("ReadVerified(tampered) = %v, want %s", err, want)
		}
	})
}

func TestReadJSON(t *testing.T) {
	type doc struct {
		A int `json:"a"`
	}
	tests := []struct {
		in   string
		want string // %s is the short digest
	}{
		{`{"a": 1}`, "<nil>"},
		{`{"a": 1, "extra": 2}`, `blob doc (%s): decode JSON: json: unknown field "extra"`},
		{`{"a": "one"}`, `blob doc (%s): decode JSON: json: cannot unmarshal string into Go struct field doc.a of type int`},
		{`{"a": 1`, `blob doc (%s): decode JSON: unexpected EOF`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s := artifacts.TestStore(t)
			d, err := s.PutBytes([]byte(tt.in), artifacts.MediaJSON)
			if err != nil {
				t.Fatal(err)
			}
			var v doc
			err = s.ReadJSON(d.Digest, "doc", &v)
			if want := strings.ReplaceAll(tt.want, "%s", artifacts.Short(d.Digest)); errString(err) != want {
				t.Errorf("ReadJSON(%s) = %v, want %s", tt.in, err, want)
			}
			if err == nil && v.A != 1 {
				t.Errorf("ReadJSON(%s) decoded a = %d, want 1", tt.in, v.A)
			}
		})
	}
}

func TestValidTitle(t *testing.T) {
	tests := []struct {
		title string
		want  bool
	}{
		{"ok/path", true},
		{"tilepipe.json", true},
		{"cases/gemm-64x64x64/input/A.arrow", true},
		{"..", false},
		{"../x", false},
		{"a/../b", false},
		{"a/..", false},
		{"/abs", false},
		{"a//b", false},
		{"./a", false},
		{"a/./b", false},
		{".", false},
		{"a/", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := artifacts.ValidTitle(tt.title); got != tt.want {
			t.Errorf("ValidTitle(%q) = %v, want %v", tt.title, got, tt.want)
		}
	}
}

func TestLayersIncludesUnnamedBlobs(t *testing.T) {
	s := artifacts.TestStore(t)
	named, err := s.PutBytes([]byte("named"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	s.Name("z/named.txt", named)
	s.Name("a/second-title.json", named)
	s.Name("z/named.txt", named) // a title given twice is one layer
	unnamed, err := s.PutBytes([]byte("unnamed"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	excluded, err := s.PutBytes([]byte("excluded"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	// Not a blob name: Layers must skip it.
	if err := os.WriteFile(filepath.Join(s.Dir(), "blobs", "sha256", "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.Layers(excluded.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Both titles of one blob are layers, each of the media type its
	// title names.
	want := []ocispec.Descriptor{
		artifacts.Layer("a/second-title.json", named),
		artifacts.Layer("blobs/"+unnamed.Digest.Encoded(), ocispec.Descriptor{MediaType: artifacts.MediaOctet, Digest: unnamed.Digest, Size: unnamed.Size}),
		artifacts.Layer("z/named.txt", named),
	}
	if want[0].MediaType != artifacts.MediaJSON || want[2].MediaType != artifacts.MediaText {
		t.Errorf("layer media types %q, %q: want %s by the .json title, %s by .txt", want[0].MediaType, want[2].MediaType, artifacts.MediaJSON, artifacts.MediaText)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Layers(%s) = %+v, want %+v", artifacts.Short(excluded.Digest), got, want)
	}
}

func TestParseDigest(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	sha512 := string(digest.SHA512.FromString("x"))
	tests := []struct {
		in   string
		want string
	}{
		{"sha256:" + hex, "<nil>"},
		{sha512, fmt.Sprintf("parse digest %q: algorithm sha512, want sha256", sha512)},
		{"sha256:" + hex[1:], fmt.Sprintf("parse digest %q: invalid checksum digest length", "sha256:"+hex[1:])},
		{"sha256:" + strings.ToUpper(hex), fmt.Sprintf("parse digest %q: invalid checksum digest format", "sha256:"+strings.ToUpper(hex))},
		{hex, fmt.Sprintf("parse digest %q: invalid checksum digest format", hex)},
		{"md5:" + hex[:32], fmt.Sprintf("parse digest %q: unsupported digest algorithm", "md5:"+hex[:32])},
		{"", `parse digest "": invalid checksum digest format`},
	}
	for _, tt := range tests {
		got, err := artifacts.ParseDigest(tt.in)
		if errString(err) != tt.want {
			t.Errorf("ParseDigest(%q) = %q, %v, want %s", tt.in, got, err, tt.want)
		}
		if err == nil && string(got) != tt.in {
			t.Errorf("ParseDigest(%q) = %q, want it unchanged", tt.in, got)
		}
		if err != nil && got != "" {
			t.Errorf("ParseDigest(%q) = %q with an error, want empty", tt.in, got)
		}
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		d    artifacts.Digest
		want string
	}{
		{artifacts.Digest("sha256:" + strings.Repeat("0123456789abcdef", 4)), "0123456789ab"},
		{"sha256:abc", "sha256:abc"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := artifacts.Short(tt.d); got != tt.want {
			t.Errorf("Short(%q) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestMismatchError(t *testing.T) {
	e := &artifacts.MismatchError{Name: "n", Path: "p", Expected: "sha256:e", Actual: "sha256:a"}
	if got, want := e.Error(), "blob n (p): digest mismatch: expected sha256:e, actual sha256:a"; got != want {
		t.Errorf("MismatchError.Error() = %s, want %s", got, want)
	}
	wrapped := fmt.Errorf("ctx: %w", e)
	if !errors.Is(wrapped, artifacts.ErrDigestMismatch) {
		t.Errorf("errors.Is(%v, ErrDigestMismatch) = false, want true", wrapped)
	}
	if errors.Is(wrapped, artifacts.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = true, want false", wrapped)
	}
}

func TestHashFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hash me"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, n, err := artifacts.HashFile(p)
	if err != nil || d != digest.FromString("hash me") || n != 7 {
		t.Errorf("HashFile(%s) = %s, %d, %v, want %s, 7, nil", p, d, n, err, digest.FromString("hash me"))
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"first", "second"} {
		if err := artifacts.WriteFileAtomic(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Errorf("WriteFileAtomic(%q) then read = %q, %v, want %q", content, b, err, content)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(m) != 0 {
		t.Errorf("temp files = %v, want none", m)
	}
}

// TestCopyOut copies a blob out with its mode, refuses an existing target,
// and names the copy when the blob on disk no longer matches its digest.
func TestCopyOut(t *testing.T) {
	s, err := artifacts.Create(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.PutBytes([]byte("object bytes\n"), artifacts.MediaText)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.o")
	if err := s.CopyOut(d.Digest, good, 0o444); err != nil {
		t.Fatalf("CopyOut = %v", err)
	}
	if b, err := os.ReadFile(good); err != nil || string(b) != "object bytes\n" {
		t.Errorf("copy = %q, %v", b, err)
	}
	if fi, err := os.Stat(good); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("copy mode = %v, %v; want 0444", fi.Mode(), err)
	}
	if err := s.CopyOut(d.Digest, good, 0o444); !errors.Is(err, os.ErrExist) {
		t.Errorf("CopyOut onto an existing file = %v, want os.ErrExist", err)
	}

	tamper(t, s.Path(d.Digest), []byte("object bytez\n"))
	bad := filepath.Join(dir, "bad.o")
	err = s.CopyOut(d.Digest, bad, 0o444)
	var me *artifacts.MismatchError
	if !errors.As(err, &me) || me.Path != bad || me.Name != "bad.o" || me.Expected != d.Digest || me.Actual != digest.FromString("object bytez\n") {
		t.Errorf("CopyOut of a tampered blob = %v, want a MismatchError naming %s", err, bad)
	}
}
