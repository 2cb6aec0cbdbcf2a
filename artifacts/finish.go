package artifacts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/tilepipe/tilepipe/artifacts/sign"
)

// Finish ends a stage: it stores doc as the stage document, lists every blob
// of the store as a layer, writes the receipt (an in-toto Statement whose
// subjects are those layers) as the manifest config, signed with key in a
// DSSE envelope unless key is nil, and commits the manifest with subject as
// predecessor. It returns the manifest descriptor.
func (s *Store) Finish(artifactType string, doc any, r Receipt, subject *ocispec.Descriptor, key *sign.Key) (ocispec.Descriptor, error) {
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
	rd, err := s.PutStatement(st, key)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return s.Commit(artifactType, rd, layers, subject)
}

// PutStatement stores an in-toto Statement as it is (MediaStatement) or,
// with a key, in a DSSE envelope signed with it (sign.MediaEnvelope).
func (s *Store) PutStatement(st any, key *sign.Key) (ocispec.Descriptor, error) {
	b, err := MarshalJSON(st)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if key == nil {
		return s.PutBytes(b, MediaStatement)
	}
	env, err := key.Seal(MediaStatement, b)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return s.PutBytes(env, sign.MediaEnvelope)
}

// ReadDoc reads the stage's document into v.
func (st *Stage) ReadDoc(v any) error {
	d, err := st.Layer(DocTitle)
	if err != nil {
		return err
	}
	return st.Store.ReadJSON(d.Digest, DocTitle, v)
}

// Receipt reads the stage's receipt, from its envelope where it is signed
// (not verified: [Stage.Envelope] is what a reviewer verifies).
func (st *Stage) Receipt() (Statement[Receipt], error) {
	var r Statement[Receipt]
	b, err := st.Statement()
	if err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("blob receipt (%s): decode JSON: %w", Short(st.Manifest.Config.Digest), err)
	}
	return r, nil
}

// Statement is the bytes of the stage's receipt statement: the config, or
// the payload of its envelope where it is signed.
func (st *Stage) Statement() ([]byte, error) {
	_, b, err := st.Envelope()
	return b, err
}

// Envelope reads the stage's config: the DSSE envelope of a signed stage
// with its payload, the receipt statement (nil envelope) of an unsigned
// one.
func (st *Stage) Envelope() (*dsse.Envelope, []byte, error) {
	b, err := st.Store.ReadVerified(st.Manifest.Config.Digest, "receipt", MaxDocBytes)
	if err != nil {
		return nil, nil, err
	}
	if st.Manifest.Config.MediaType != sign.MediaEnvelope {
		return nil, b, nil
	}
	env, payload, err := sign.Parse(b, MediaStatement)
	if err != nil {
		return nil, nil, fmt.Errorf("receipt (%s): %w", Short(st.Manifest.Config.Digest), err)
	}
	return env, payload, nil
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

// NewReceipt is a stage's receipt as the stage begins: its name (the
// receipt's stage: capture, prepare, replay, audit), the tool, this
// machine's fingerprint, when it started and its parameters; for a stage
// after the capture, its predecessor pred (the stage whose manifest its
// own manifest names as subject), with the time deps recorded it as
// verified. The stage adds its commands and, before Finish, every
// dependency deps recorded.
func NewReceipt(stage string, start time.Time, params map[string]any, pred *Stage, deps *Deps) Receipt {
	r := Receipt{Stage: stage, Tool: ToolInfo(), StartedOn: start, Environment: Fingerprint(), Parameters: params}
	if pred != nil {
		dep := Dependency{Name: StageName(pred.Manifest.ArtifactType) + " manifest", Digest: pred.Descriptor.Digest}
		for _, d := range deps.List() {
			if d.Digest == pred.Descriptor.Digest {
				dep.VerifiedAt = d.VerifiedAt
				break
			}
		}
		r.Predecessor = &dep
	}
	return r
}
