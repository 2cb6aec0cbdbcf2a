package artifacts

import (
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type titles struct {
	mu    sync.Mutex
	byDig map[Digest][]ocispec.Descriptor // every title of a digest, in the order given
}

// Name gives blob d a logical title, the path of one of its layers. A
// digest may have several titles (equal content is stored once, and each
// title is a layer of its own: every visit's outputs are listed under
// that visit, whichever visit first produced the bytes); giving one title
// twice is a no-op.
func (s *Store) Name(title string, d ocispec.Descriptor) ocispec.Descriptor {
	s.titles.mu.Lock()
	defer s.titles.mu.Unlock()
	if s.titles.byDig == nil {
		s.titles.byDig = map[Digest][]ocispec.Descriptor{}
	}
	for _, l := range s.titles.byDig[d.Digest] {
		if l.Annotations[AnnotationTitle] == title {
			return d
		}
	}
	s.titles.byDig[d.Digest] = append(s.titles.byDig[d.Digest], Layer(title, d))
	return d
}

// Layers lists every blob in the store except those in exclude, as titled
// layers sorted by title, a blob once for each of its titles. Blobs never
// named get the title "blobs/<hex>", so a stage's manifest always covers
// everything it wrote.
func (s *Store) Layers(exclude ...Digest) ([]ocispec.Descriptor, error) {
	skip := map[Digest]bool{}
	for _, d := range exclude {
		skip[d] = true
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, "blobs", "sha256"))
	if err != nil {
		return nil, err
	}
	s.titles.mu.Lock()
	defer s.titles.mu.Unlock()
	var out []ocispec.Descriptor
	for _, e := range ents {
		d := digest.NewDigestFromEncoded(digest.SHA256, e.Name())
		if d.Validate() != nil || skip[d] {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		if ls, ok := s.titles.byDig[d]; ok {
			for _, l := range ls {
				l.Size = fi.Size()
				out = append(out, l)
			}
			continue
		}
		out = append(out, Layer("blobs/"+e.Name(), ocispec.Descriptor{MediaType: MediaOctet, Digest: d, Size: fi.Size()}))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Annotations[AnnotationTitle] < out[j].Annotations[AnnotationTitle] })
	return out, nil
}
