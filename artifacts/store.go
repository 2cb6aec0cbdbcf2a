package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts/crashpoint"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"golang.org/x/sys/unix"
)

// Media types of tilepipe's blobs.
const (
	MediaJSON      = "application/json"
	MediaArrow     = "application/vnd.apache.arrow.file"
	MediaStatement = "application/vnd.in-toto+json"
	MediaOctet     = "application/octet-stream"
	MediaText      = "text/plain"
	MediaMarkdown  = "text/markdown"
	// MediaJSONL is JSON Lines (https://jsonlines.org): one JSON value a
	// line, as journal.jsonl is; not one JSON document.
	MediaJSONL = "application/jsonl"
	MediaExec  = "application/vnd.tilepipe.executable"
)

// AnnotationTitle names a layer inside a stage (its logical path).
const AnnotationTitle = ocispec.AnnotationTitle

// Size limits for the small JSON documents a stage reads from the store.
const (
	maxIndexBytes    = 1 << 20
	maxManifestBytes = 64 << 20
	// MaxDocBytes bounds any JSON document read with ReadJSON.
	MaxDocBytes = 256 << 20
)

// Store is one stage directory: an OCI image layout whose blobs are the
// stage's products, whose manifest lists them, and whose index.json is the
// commit point. A directory without index.json is an incomplete stage.
//
// # Lifecycle
//
// A stage is written once, by one writer holding its lock:
//
//   - begin: [Create] (a new directory), [Begin] (capture and prepare: a
//     stage whose writer died is started again) or [Resume] (replay: an
//     uncommitted stage of its own is continued);
//   - write: [Store.PutBytes], [Store.PutJSON], [Store.Name] and the
//     other puts, each blob atomic and content-addressed;
//   - end: [Store.Finish] (the document and the receipt, with its
//     predecessor, then the commit) or [Store.Commit]; on an error before
//     it, [Store.Abort] (deferred) removes what this writer created, and
//     [Store.Release] keeps an uncommitted stage to be resumed.
//
// Readers see only committed stages, through [ReadStage] (or [OpenStage]
// for a stage without a document), every blob re-hashed before anything
// is read; [ValidateStage] holds a committed stage to the invariants
// every writer keeps.
type Store struct {
	dir    string
	titles titles
	// lockFile holds the writer lock ([LockFile]) of a stage being
	// written; created and committed say what Discard may remove.
	lockFile           *os.File
	created, committed bool
}

// Create makes dir, which must not exist, as a new empty layout. The parent
// must exist. Creation is exclusive: two stages cannot share a directory.
func Create(dir string) (*Store, error) {
	// Paths into the store are handed to child processes that run in other
	// directories, so the store always knows itself by an absolute path.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("output directory %s already exists; stages never overwrite, choose a new one", dir)
		}
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	s := &Store{dir: dir, created: true}
	if err := s.lock(); err != nil {
		os.Remove(dir)
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err := writeFileAtomic(filepath.Join(dir, ocispec.ImageLayoutFile), layout); err != nil {
		return nil, err
	}
	return s, nil
}

// Open opens a complete stage directory (one with index.json).
func Open(dir string) (*Store, error) {
	s, err := OpenIncomplete(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, ocispec.ImageIndexFile)); err != nil {
		return nil, fmt.Errorf("open stage %s: index.json missing: the stage did not finish (incomplete or interrupted)", dir)
	}
	return s, nil
}

// OpenIncomplete opens a layout that may not have been committed yet, for
// resuming the stage that writes it.
func OpenIncomplete(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("open stage: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open stage %s: not a directory", dir)
	}
	b, err := readRegular(filepath.Join(dir, ocispec.ImageLayoutFile), 4096)
	if err != nil {
		return nil, fmt.Errorf("open stage %s: %w", dir, err)
	}
	var l ocispec.ImageLayout
	if err := json.Unmarshal(b, &l); err != nil || l.Version != ocispec.ImageLayoutVersion {
		return nil, fmt.Errorf("open stage %s: oci-layout: want imageLayoutVersion %q", dir, ocispec.ImageLayoutVersion)
	}
	return &Store{dir: dir}, nil
}

// Dir is the stage directory.
func (s *Store) Dir() string { return s.dir }

// Path is where the blob d lives. d must be a valid sha256 digest.
func (s *Store) Path(d Digest) string {
	return filepath.Join(s.dir, "blobs", "sha256", d.Encoded())
}

// CopyOut copies blob d to a new file path (which must not exist) with
// mode, then hashes the copy: a blob changed on disk, or a copy that went
// wrong, is a *MismatchError naming path.
func (s *Store) CopyOut(d Digest, path string, mode os.FileMode) error {
	src, err := os.Open(s.Path(d))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	got, _, err := HashFile(path)
	if err != nil {
		return err
	}
	if got != d {
		return &MismatchError{Name: filepath.Base(path), Path: path, Expected: d, Actual: got}
	}
	return nil
}

// Writer streams one blob into the store (docs/decisions.md, "Store at
// disk speed"). The bytes go to a temporary file as they come; a goroutine
// hashes a copy of them (SHA-256) meanwhile, and the kernel is asked to
// start writing them back every writebackChunk, so hashing and the disk
// overlap instead of following each other. Commit then fsyncs, reads the
// file back and compares its CRC-32C with the one of the bytes written (so
// what reached the file is what was hashed, at 24 GB/s instead of a second
// SHA-256 pass), and renames it into place.
type Writer struct {
	s         *Store
	f         *os.File
	size      int64
	crc       uint32 // CRC-32C of every byte written
	mediaType string
	done      bool
	chunks    chan []byte        // filled buffers of the written bytes, in order, for the hasher
	free      chan []byte        // buffers the hasher is done with
	cur       []byte             // the buffer being filled
	sum       chan digest.Digest // the hasher's answer
	started   int64              // bytes whose writeback was started
	err       error              // the first write error: the blob is unusable
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Hashing and writeback granularity: hashBuffers buffers of hashChunk
// bytes circulate between the writer and the hasher.
const (
	hashChunk      = 1 << 20
	hashBuffers    = 4
	writebackChunk = 8 << 20
)

// NewWriter starts a blob of the given media type.
func (s *Store) NewWriter(mediaType string) (*Writer, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "blobs"), ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("start blob: %w", err)
	}
	w := &Writer{s: s, f: f, mediaType: mediaType, chunks: make(chan []byte, hashBuffers), free: make(chan []byte, hashBuffers), sum: make(chan digest.Digest, 1)}
	for range hashBuffers - 1 {
		w.free <- make([]byte, 0, hashChunk)
	}
	w.cur = make([]byte, 0, hashChunk)
	go func(chunks <-chan []byte, free chan<- []byte, sum chan<- digest.Digest) {
		h := sha256.New()
		for c := range chunks {
			h.Write(c)
			free <- c[:0]
		}
		sum <- digest.NewDigest(digest.SHA256, h)
	}(w.chunks, w.free, w.sum)
	return w, nil
}

func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("blob writer already finished")
	}
	n, err := w.f.Write(p)
	w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	for rest := p[:n]; len(rest) > 0; {
		k := min(len(rest), hashChunk-len(w.cur))
		w.cur = append(w.cur, rest[:k]...)
		rest = rest[k:]
		if len(w.cur) == hashChunk {
			w.chunks <- w.cur
			w.cur = <-w.free
		}
	}
	w.size += int64(n)
	if err != nil {
		w.err = err
		return n, err
	}
	if w.size-w.started >= writebackChunk {
		// Start writing back what is written so far; Commit's fsync then
		// waits for less. Advisory: an error here shows again at fsync.
		unix.SyncFileRange(int(w.f.Fd()), w.started, w.size-w.started, unix.SYNC_FILE_RANGE_WRITE)
		w.started = w.size
	}
	return n, nil
}

// digest ends the hasher and returns what it hashed.
func (w *Writer) digest() digest.Digest {
	if w.chunks != nil {
		if len(w.cur) > 0 {
			w.chunks <- w.cur
		}
		close(w.chunks)
		w.chunks = nil
		return <-w.sum
	}
	return ""
}

// Abort discards the blob being written.
func (w *Writer) Abort() {
	if !w.done {
		w.done = true
		w.digest()
		w.f.Close()
		os.Remove(w.f.Name())
	}
}

// Commit fsyncs the temp file, reads it back to confirm it holds the bytes
// that were hashed, renames it into place, fsyncs the directory and makes
// the blob read-only. Equal content already present is kept as it is
// (after verifying it).
func (w *Writer) Commit() (ocispec.Descriptor, error) {
	if w.done {
		return ocispec.Descriptor{}, errors.New("blob writer already finished")
	}
	defer w.Abort()
	d := w.digest()
	if w.err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write blob: %w", w.err)
	}
	// The bytes in the file, not the bytes we meant to write, are what
	// count: read back, they must be the ones hashed. The read-back runs
	// while fsync writes the same pages out; both must succeed.
	back := make(chan error, 1)
	go func() { back <- w.readBack() }()
	serr := w.f.Sync()
	if err := <-back; err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("new blob %s (%s): %w", Short(d), w.f.Name(), err)
	}
	if serr != nil {
		return ocispec.Descriptor{}, fmt.Errorf("sync blob %s: %w", Short(d), serr)
	}
	if err := w.f.Close(); err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: w.mediaType, Digest: d, Size: w.size}
	final := w.s.Path(d)
	if _, err := os.Lstat(final); err == nil {
		if err := w.s.Verify(desc, "existing blob"); err != nil {
			return ocispec.Descriptor{}, err
		}
		return desc, nil
	}
	if err := os.Chmod(w.f.Name(), 0o444); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := os.Rename(w.f.Name(), final); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("commit blob %s: %w", Short(d), err)
	}
	w.done = true
	if err := syncDir(filepath.Dir(final)); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

// readBack reads the whole temporary file from its start and compares its
// length and CRC-32C with the bytes written.
func (w *Writer) readBack() error {
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(w.f, 0, 1<<62))
	if err != nil {
		return err
	}
	if n != w.size || h.Sum32() != w.crc {
		return fmt.Errorf("the file holds %d bytes with CRC-32C %08x, %d bytes with CRC-32C %08x were written and hashed", n, h.Sum32(), w.size, w.crc)
	}
	return nil
}

// Put stores everything r yields as one blob.
func (s *Store) Put(r io.Reader, mediaType string) (ocispec.Descriptor, error) {
	w, err := s.NewWriter(mediaType)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Abort()
		return ocispec.Descriptor{}, fmt.Errorf("write blob: %w", err)
	}
	return w.Commit()
}

// PutBytes stores b as one blob.
func (s *Store) PutBytes(b []byte, mediaType string) (ocispec.Descriptor, error) {
	return s.Put(bytes.NewReader(b), mediaType)
}

// PutJSON stores v, indented, as a JSON blob.
func (s *Store) PutJSON(v any, mediaType string) (ocispec.Descriptor, error) {
	b, err := MarshalJSON(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return s.PutBytes(b, mediaType)
}

// PutFile stores the regular file at path, streaming it.
func (s *Store) PutFile(path, mediaType string) (ocispec.Descriptor, error) {
	f, err := openRegular(path)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer f.Close()
	return s.Put(f, mediaType)
}

// Verify re-hashes the bytes of blob desc. It returns an error wrapping
// [ErrNotFound] when the blob is missing or not a regular file, and a
// [*MismatchError] (matching [ErrDigestMismatch]) when the bytes or the size
// differ. name is the blob's logical name for messages.
func (s *Store) Verify(desc ocispec.Descriptor, name string) error {
	if err := desc.Digest.Validate(); err != nil || desc.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("blob %s: digest %q: want sha256:<64 hex>", name, desc.Digest)
	}
	p := s.Path(desc.Digest)
	got, err := hashFile(p)
	if err != nil {
		return fmt.Errorf("blob %s (%s): %w", name, Short(desc.Digest), err)
	}
	if got.d != desc.Digest {
		return &MismatchError{Name: name, Path: p, Expected: desc.Digest, Actual: got.d}
	}
	if desc.Size != 0 && got.n != desc.Size {
		return fmt.Errorf("blob %s (%s): size %d, descriptor says %d: %w", name, Short(desc.Digest), got.n, desc.Size, ErrDigestMismatch)
	}
	return nil
}

// ReadVerified reads a whole blob of at most limit bytes and checks its
// digest on the bytes read, so a reader never acts on unverified content.
func (s *Store) ReadVerified(d Digest, name string, limit int64) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("blob %s: digest %q: %w", name, d, err)
	}
	b, err := readRegular(s.Path(d), limit)
	if err != nil {
		return nil, fmt.Errorf("blob %s (%s): %w", name, Short(d), err)
	}
	if got := digest.FromBytes(b); got != d {
		return nil, &MismatchError{Name: name, Path: s.Path(d), Expected: d, Actual: got}
	}
	return b, nil
}

// ReadJSON reads a verified JSON blob into v, refusing unknown fields.
func (s *Store) ReadJSON(d Digest, name string, v any) error {
	b, err := s.ReadVerified(d, name, MaxDocBytes)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("blob %s (%s): decode JSON: %w", name, Short(d), err)
	}
	// One value: whatever follows it (a second document a reader would
	// not see) is refused, not ignored.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("blob %s (%s): decode JSON: data after the document", name, Short(d))
	}
	return nil
}

// Manifest is what a stage commits: its products as layers, its receipt as
// config and its predecessor as subject.
type Manifest = ocispec.Manifest

// Commit writes the stage manifest and then index.json, the commit point.
// Every layer and the config must already be in the store.
func (s *Store) Commit(artifactType string, config ocispec.Descriptor, layers []ocispec.Descriptor, subject *ocispec.Descriptor) (ocispec.Descriptor, error) {
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       config,
		Layers:       layers,
		Subject:      subject,
	}
	b, err := MarshalJSON(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return s.CommitManifest(b, artifactType)
}

// CommitManifest stores manifest, the bytes of an image manifest of
// artifactType whose config and layers are already in the store, as it is
// (a stage pulled from a registry keeps its manifest digest), and writes
// index.json pointing at it: the commit point.
func (s *Store) CommitManifest(manifest []byte, artifactType string) (ocispec.Descriptor, error) {
	md, err := s.PutBytes(manifest, ocispec.MediaTypeImageManifest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	md.ArtifactType = artifactType
	if name := StageName(artifactType); name != "" {
		// skopeo and oras address a layout's manifest by this name
		// (oci:DIR:capture, DIR:capture).
		md.Annotations = map[string]string{ocispec.AnnotationRefName: name}
	}
	idx := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{md},
	}
	b, _ := json.MarshalIndent(idx, "", "  ")
	if err := writeFileAtomic(filepath.Join(s.dir, ocispec.ImageIndexFile), append(b, '\n')); err != nil {
		return ocispec.Descriptor{}, err
	}
	s.committed = true
	crashpoint.Hit("commit")
	s.unlock()
	return md, nil
}

// Stage is a verified view of a committed stage directory.
type Stage struct {
	Store      *Store
	Descriptor ocispec.Descriptor // of the manifest
	Manifest   ocispec.Manifest
	// Layers by title.
	Layers map[string]ocispec.Descriptor
}

// OpenStage opens dir, checks that its manifest has the wanted artifact
// type, and re-hashes the manifest, the config and every layer before
// returning. verified is called once per blob after it was re-hashed.
//
// The index's descriptor must describe the manifest blob exactly (its
// size, the OCI manifest media type, the manifest's artifactType), every
// config and layer descriptor's size must be its blob's, and blobs/ may
// hold nothing else: a file no descriptor lists, a directory or anything
// not a regular file is an error naming it. Files beside blobs/ (replay's
// plan.json and journal.jsonl) are not looked at.
func OpenStage(dir, artifactType string, verified func(name string, d ocispec.Descriptor)) (*Stage, error) {
	s, err := Open(dir)
	if err != nil {
		return nil, err
	}
	md, m, err := readManifest(s, dir, artifactType)
	if err != nil {
		return nil, err
	}
	if err := onlyListed(s, md.Digest, m); err != nil {
		return nil, fmt.Errorf("stage %s: %w", dir, err)
	}
	if verified != nil {
		verified("manifest", md)
	}
	st := &Stage{Store: s, Descriptor: md, Manifest: m, Layers: map[string]ocispec.Descriptor{}}
	if err := verifySized(s, m.Config, "receipt"); err != nil {
		return nil, fmt.Errorf("stage %s: %w", dir, err)
	}
	if verified != nil {
		verified("receipt", m.Config)
	}
	if err := st.verifyLayers(dir, verified); err != nil {
		return nil, err
	}
	return st, nil
}

// readManifest reads dir's index.json and the one manifest it lists,
// re-hashed, and checks the manifest's types and digests (OpenStage).
func readManifest(s *Store, dir, artifactType string) (md ocispec.Descriptor, m ocispec.Manifest, err error) {
	b, err := readRegular(filepath.Join(dir, ocispec.ImageIndexFile), maxIndexBytes)
	if err != nil {
		return md, m, fmt.Errorf("stage %s: %w", dir, err)
	}
	var idx ocispec.Index
	if err := strictJSON(b, &idx); err != nil {
		return md, m, fmt.Errorf("stage %s: index.json: %w", dir, err)
	}
	if len(idx.Manifests) != 1 {
		return md, m, fmt.Errorf("stage %s: index.json: manifests: want exactly 1, got %d", dir, len(idx.Manifests))
	}
	md = idx.Manifests[0]
	mb, err := s.ReadVerified(md.Digest, "manifest", maxManifestBytes)
	if err != nil {
		return md, m, fmt.Errorf("stage %s: %w", dir, err)
	}
	m, err = ParseManifest(mb)
	if err != nil {
		return md, m, fmt.Errorf("stage %s: manifest %s: %w", dir, Short(md.Digest), err)
	}
	if m.ArtifactType != artifactType {
		return md, m, fmt.Errorf("stage %s: manifest artifactType: want %s, got %q", dir, artifactType, m.ArtifactType)
	}
	if err := indexDescriptor(md, m, int64(len(mb))); err != nil {
		return md, m, fmt.Errorf("stage %s: index.json: %w", dir, err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest {
		return md, m, fmt.Errorf("stage %s: manifest mediaType: want %s, got %q", dir, ocispec.MediaTypeImageManifest, m.MediaType)
	}
	if m.Config.MediaType != MediaStatement && m.Config.MediaType != sign.MediaEnvelope {
		return md, m, fmt.Errorf("stage %s: manifest config mediaType: want %s (the receipt) or %s (the receipt, signed), got %q", dir, MediaStatement, sign.MediaEnvelope, m.Config.MediaType)
	}
	for i, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if err := d.Digest.Validate(); err != nil || d.Digest.Algorithm() != digest.SHA256 {
			what := "config"
			if i > 0 {
				what = fmt.Sprintf("layers[%d]", i-1)
			}
			return md, m, fmt.Errorf("stage %s: manifest %s: digest %q: want sha256:<64 hex>", dir, what, d.Digest)
		}
	}
	return md, m, nil
}

// verifyLayers re-hashes every layer of st's manifest (a blob of several
// titles once), each title clean and once, and names them in st.Layers.
func (st *Stage) verifyLayers(dir string, verified func(name string, d ocispec.Descriptor)) error {
	hashed := map[Digest]ocispec.Descriptor{}
	for i, l := range st.Manifest.Layers {
		title := l.Annotations[AnnotationTitle]
		if title == "" {
			return fmt.Errorf("stage %s: manifest layers[%d]: missing %s annotation", dir, i, AnnotationTitle)
		}
		if !ValidTitle(title) {
			return fmt.Errorf("stage %s: manifest layers[%d]: title %q: want a clean relative path", dir, i, title)
		}
		if _, dup := st.Layers[title]; dup {
			return fmt.Errorf("stage %s: manifest layers[%d]: duplicate title %q", dir, i, title)
		}
		// A blob of several titles is hashed once; each title must
		// describe it alike.
		if first, seen := hashed[l.Digest]; !seen {
			if err := verifySized(st.Store, l, title); err != nil {
				return fmt.Errorf("stage %s: %w", dir, err)
			}
			hashed[l.Digest] = l
		} else if first.Size != l.Size {
			return fmt.Errorf("stage %s: manifest layers[%d] %q: size %d, layer %q of the same blob %s says %d", dir, i, title, l.Size, first.Annotations[AnnotationTitle], Short(l.Digest), first.Size)
		}
		if verified != nil {
			verified(title, l)
		}
		st.Layers[title] = l
	}
	return nil
}

// ParseManifest decodes an image manifest, refusing unknown fields and
// trailing data. What it describes is checked by OpenStage.
func ParseManifest(b []byte) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	err := strictJSON(b, &m)
	return m, err
}

// indexDescriptor checks index.json's descriptor of the manifest against
// the manifest blob (size bytes) it names.
func indexDescriptor(md ocispec.Descriptor, m ocispec.Manifest, size int64) error {
	switch {
	case md.Size != size:
		return fmt.Errorf("manifest descriptor size %d, the manifest blob %s has %d bytes", md.Size, Short(md.Digest), size)
	case md.MediaType != ocispec.MediaTypeImageManifest:
		return fmt.Errorf("manifest descriptor mediaType %q, want %s", md.MediaType, ocispec.MediaTypeImageManifest)
	case md.ArtifactType != m.ArtifactType:
		return fmt.Errorf("manifest descriptor artifactType %q, the manifest says %q", md.ArtifactType, m.ArtifactType)
	}
	// The stage's name, or none in a stage written before it.
	for k, v := range md.Annotations {
		if want := StageName(m.ArtifactType); k != ocispec.AnnotationRefName || v != want {
			return fmt.Errorf("manifest descriptor annotation %s=%q: want only %s=%q (or none)", k, v, ocispec.AnnotationRefName, want)
		}
	}
	return nil
}

// verifySized is [Store.Verify] with the size always checked: a descriptor
// of size 0 describes an empty blob, not one of unknown size.
func verifySized(s *Store, desc ocispec.Descriptor, name string) error {
	if err := s.Verify(desc, name); err != nil {
		return err
	}
	fi, err := os.Lstat(s.Path(desc.Digest))
	if err != nil {
		return fmt.Errorf("blob %s (%s): %w", name, Short(desc.Digest), err)
	}
	if fi.Size() != desc.Size {
		return fmt.Errorf("blob %s (%s): size %d, descriptor says %d: %w", name, Short(desc.Digest), fi.Size(), desc.Size, ErrDigestMismatch)
	}
	return nil
}

// maxUnlisted bounds the unlisted entries one error names.
const maxUnlisted = 10

// onlyListed checks that blobs/ holds the directory sha256 and, in it,
// only regular files that are the manifest (manifest), its config or one
// of its layers: whatever else a stage's blobs/ holds was put there
// without the manifest saying so.
func onlyListed(s *Store, manifest Digest, m ocispec.Manifest) error {
	listed := map[string]bool{manifest.Encoded(): true, m.Config.Digest.Encoded(): true}
	for _, l := range m.Layers {
		listed[l.Digest.Encoded()] = true
	}
	var bad []string
	blobs := filepath.Join(s.dir, "blobs")
	if fi, err := os.Lstat(blobs); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("blobs: not a directory (mode %s)", fi.Mode())
	}
	ents, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == "sha256" && e.Type().IsDir() {
			continue
		}
		bad = append(bad, "blobs/"+e.Name()+": "+unlisted(e))
	}
	ents, err = os.ReadDir(filepath.Join(blobs, "sha256"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !listed[e.Name()] {
			bad = append(bad, "blobs/sha256/"+e.Name()+": "+unlisted(e))
		}
	}
	if len(bad) > maxUnlisted {
		bad = append(bad[:maxUnlisted:maxUnlisted], fmt.Sprintf("and %d more", len(bad)-maxUnlisted))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// unlisted says why an entry of blobs/ does not belong there.
func unlisted(e fs.DirEntry) string {
	mode := e.Type()
	if fi, err := e.Info(); err == nil {
		mode = fi.Mode()
	}
	switch {
	case mode.IsDir():
		return "a directory, not a blob"
	case !mode.IsRegular():
		return fmt.Sprintf("not a regular file (mode %s)", mode)
	}
	return "not listed in the manifest"
}

// Layer returns the layer titled name or an error wrapping [ErrNotFound].
func (st *Stage) Layer(name string) (ocispec.Descriptor, error) {
	d, ok := st.Layers[name]
	if !ok {
		return d, fmt.Errorf("stage %s: layer %q: %w", st.Store.dir, name, ErrNotFound)
	}
	return d, nil
}

// Has reports whether d is one of the stage's layers (so it was verified).
func (st *Stage) Has(d Digest) bool {
	for _, l := range st.Layers {
		if l.Digest == d {
			return true
		}
	}
	return false
}

// Titles lists the layer titles, sorted.
func (st *Stage) Titles() []string {
	t := make([]string, 0, len(st.Layers))
	for k := range st.Layers {
		t = append(t, k)
	}
	sort.Strings(t)
	return t
}

// Layer builds a titled layer descriptor, its media type the one its
// title's extension names (MediaFor).
func Layer(title string, d ocispec.Descriptor) ocispec.Descriptor {
	d.Annotations = map[string]string{AnnotationTitle: title}
	d.MediaType = MediaFor(title, d.MediaType)
	return d
}

// MediaFor is the media type of a layer titled title: the one its
// extension names (.json, .jsonl, .md, .arrow, .txt), else stored, the
// type the blob was written with. A title says what a layer is, so one
// rule keeps every stage's media types in agreement with their names.
func MediaFor(title, stored string) string {
	switch path.Ext(title) {
	case ".json":
		return MediaJSON
	case ".jsonl":
		return MediaJSONL
	case ".md":
		return MediaMarkdown
	case ".arrow":
		return MediaArrow
	case ".txt":
		return MediaText
	}
	return stored
}

// ValidTitle reports whether title is a clean relative path (no "..",
// no leading "/", no empty elements).
func ValidTitle(title string) bool {
	if title == "" || strings.HasPrefix(title, "/") || filepath.Clean(title) != title {
		return false
	}
	for _, e := range strings.Split(title, "/") {
		if e == ".." || e == "." || e == "" {
			return false
		}
	}
	return true
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("want one JSON value, found more after it")
	}
	return nil
}
