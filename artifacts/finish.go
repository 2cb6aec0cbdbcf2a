package artifacts

import (
	"fmt"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Finish ends a stage: it stores doc as the stage document, lists every blob
// of the store as a layer, writes the receipt (an in-toto Statement whose
// subjects are those layers) as the manifest config, and commits the
// manifest with subject as predecessor. It returns the manifest descriptor.
func (s *Store) Finish(artifactType string, doc any, r Receipt, subject *ocispec.Descriptor) (ocispec.Descriptor, error) {
	dd, err := s.PutJSON(doc, MediaJSON)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	s.Name(DocTitle, dd)
	layers, err := s.Layers()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	// OpenStage refuses a manifest with two layers of one title, so
	// refuse to commit one (two different blobs given the same Name).
	seen := map[string]bool{}
	for i, l := range layers {
		title := l.Annotations[AnnotationTitle]
		if seen[title] {
			return ocispec.Descriptor{}, fmt.Errorf("finish stage: layers[%d]: duplicate title %q", i, title)
		}
		seen[title] = true
	}
	st := Statement[Receipt]{Type: StatementType, PredicateType: ReceiptPredicate}
	for _, l := range layers {
		st.Subject = append(st.Subject, SubjectOf(l.Annotations[AnnotationTitle], l))
	}
	r.FinishedOn = time.Now().UTC()
	st.Predicate = r
	rd, err := s.PutJSON(st, MediaStatement)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return s.Commit(artifactType, rd, layers, subject)
}

// ReadDoc reads the stage's document into v.
func (st *Stage) ReadDoc(v any) error {
	d, err := st.Layer(DocTitle)
	if err != nil {
		return err
	}
	return st.Store.ReadJSON(d.Digest, DocTitle, v)
}

// Receipt reads the stage's receipt.
func (st *Stage) Receipt() (Statement[Receipt], error) {
	var r Statement[Receipt]
	err := st.Store.ReadJSON(st.Manifest.Config.Digest, "receipt", &r)
	return r, err
}

// Deps collects consumed blobs with their verification times.
type Deps struct {
	list []Dependency
}

// Verified records that d's bytes were re-hashed now.
func (d *Deps) Verified(name string, desc ocispec.Descriptor) {
	d.list = append(d.list, Dependency{Name: name, Digest: desc.Digest, VerifiedAt: time.Now().UTC()})
}

// List is every recorded dependency.
func (d *Deps) List() []Dependency { return d.list }
