package artifacts

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Checkpoint is the chain a claim rests on: a capture, the prepared stage
// made from it and a replay of that, each opened as ReadStage opens a
// stage (every blob re-hashed, its document read strictly, its schema
// checked) and held to ValidateStage's invariants. The audit reads a
// checkpoint through it; ValidateCheckpoint checks the links between its
// stages.
type Checkpoint struct {
	Capture, Prepared, Replay *Stage
	CaptureDoc                CaptureDoc
	PreparedDoc               PreparedDoc
	ReplayDoc                 ReplayDoc
}

// OpenCheckpoint opens the stages at capture, prepared and replay, in
// that order; verified (may be nil) sees every blob re-hashed, with its
// stage's artifact type. A stage that does not open, or breaks an
// invariant, is left nil and its error joined into the one returned; the
// others are kept, so a caller that reports every problem (the audit)
// goes on with what opened.
func OpenCheckpoint(capture, prepared, replay string, verified func(stageType string, d ocispec.Descriptor)) (*Checkpoint, error) {
	cp := &Checkpoint{}
	var errs []error
	for _, s := range []struct {
		dir  string
		into **Stage
		doc  Document
	}{{capture, &cp.Capture, &cp.CaptureDoc}, {prepared, &cp.Prepared, &cp.PreparedDoc}, {replay, &cp.Replay, &cp.ReplayDoc}} {
		typ := s.doc.StageType()
		st, err := ReadStage(s.dir, s.doc, func(_ string, d ocispec.Descriptor) {
			if verified != nil {
				verified(typ, d)
			}
		})
		if err == nil {
			err = ValidateStage(st)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*s.into = st
	}
	return cp, errors.Join(errs...)
}

// ValidateCheckpoint checks the links between the checkpoint's stages
// (ChainProblems) and returns every violation, joined; nil when there is
// none.
func ValidateCheckpoint(cp *Checkpoint, also map[Digest]bool) error {
	var errs []error
	for _, p := range ChainProblems(cp, also) {
		errs = append(errs, errors.New(p))
	}
	return errors.Join(errs...)
}

// ChainProblems is one line per broken link of the chain capture ←
// prepared ← replay: each manifest's subject is its predecessor's
// manifest; each document names its predecessors; each receipt is a
// stage receipt of its own stage whose subjects are its manifest's layers
// and which recorded, as verified before use, every blob of its
// predecessors (the replay's: the prepared stage's and the capture's) and
// no other, but also (a merged replay's shard products). The three
// stages must have opened.
func ChainProblems(cp *Checkpoint, also map[Digest]bool) []string {
	var p []string
	if s := cp.Prepared.Manifest.Subject; s == nil || s.Digest != cp.Capture.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared manifest subject: want capture manifest %s", cp.Capture.Descriptor.Digest))
	}
	if s := cp.Replay.Manifest.Subject; s == nil || s.Digest != cp.Prepared.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay manifest subject: want prepared manifest %s", cp.Prepared.Descriptor.Digest))
	}
	if cp.PreparedDoc.Capture != cp.Capture.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared %s capture: %s, want %s", DocTitle, cp.PreparedDoc.Capture, cp.Capture.Descriptor.Digest))
	}
	if cp.ReplayDoc.Prepared != cp.Prepared.Descriptor.Digest || cp.ReplayDoc.Capture != cp.Capture.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay %s: prepared %s capture %s, want %s and %s", DocTitle, cp.ReplayDoc.Prepared, cp.ReplayDoc.Capture, cp.Prepared.Descriptor.Digest, cp.Capture.Descriptor.Digest))
	}
	for _, st := range []struct {
		name        string
		s           *Stage
		preds       []*Stage
		alsoAllowed map[Digest]bool
	}{{"capture", cp.Capture, nil, nil}, {"prepare", cp.Prepared, []*Stage{cp.Capture}, nil}, {"replay", cp.Replay, []*Stage{cp.Prepared, cp.Capture}, also}} {
		p = append(p, receiptProblems(st.name, st.s, st.preds, st.alsoAllowed)...)
	}
	return p
}

// receiptProblems checks stage s's receipt: its type and stage name, its
// subjects against the manifest's layers, and what it consumed against
// the blobs of its predecessors preds (and also).
func receiptProblems(name string, s *Stage, preds []*Stage, also map[Digest]bool) []string {
	var p []string
	r, err := s.Receipt()
	if err != nil {
		return []string{fmt.Sprintf("%s receipt: %v", name, err)}
	}
	if r.Type != StatementType || r.PredicateType != ReceiptPredicate || r.Predicate.Stage != name {
		p = append(p, fmt.Sprintf("%s receipt: _type %q predicateType %q stage %q", name, r.Type, r.PredicateType, r.Predicate.Stage))
	}
	subj := map[string]string{}
	for _, sb := range r.Subject {
		subj[sb.Name] = sb.Digest["sha256"]
	}
	for _, title := range slices.Sorted(maps.Keys(s.Layers)) {
		if l := s.Layers[title]; subj[title] != l.Digest.Encoded() {
			p = append(p, fmt.Sprintf("%s receipt: subject %q is %q, manifest layer has %s", name, title, subj[title], l.Digest))
		}
	}
	if len(subj) != len(s.Layers) {
		p = append(p, fmt.Sprintf("%s receipt: %d subjects, manifest has %d layers", name, len(subj), len(s.Layers)))
	}
	if len(preds) == 0 {
		return p
	}
	allowed := map[Digest]bool{}
	for d := range also {
		allowed[d] = true
	}
	for _, pst := range preds {
		allowed[pst.Descriptor.Digest], allowed[pst.Manifest.Config.Digest] = true, true
		for _, l := range pst.Layers {
			allowed[l.Digest] = true
		}
	}
	consumed := map[Digest]time.Time{}
	for _, d := range r.Predicate.ResolvedDependencies {
		consumed[d.Digest] = d.VerifiedAt
		if !allowed[d.Digest] {
			p = append(p, fmt.Sprintf("%s receipt: consumed %s (%s), which no predecessor stage produced", name, d.Name, Short(d.Digest)))
		}
	}
	for _, pst := range preds {
		for _, title := range slices.Sorted(maps.Keys(pst.Layers)) {
			if _, ok := consumed[pst.Layers[title].Digest]; !ok {
				p = append(p, fmt.Sprintf("%s receipt: consumed blob %s (%s) was not recorded as verified", name, title, Short(pst.Layers[title].Digest)))
			}
		}
		if _, ok := consumed[pst.Descriptor.Digest]; !ok {
			p = append(p, fmt.Sprintf("%s receipt: predecessor manifest %s was not recorded as verified", name, Short(pst.Descriptor.Digest)))
		}
	}
	return p
}
