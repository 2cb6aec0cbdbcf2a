package audit

import (
	"fmt"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
)

// chainCheck checks subjects, document links, receipts and consumption.
func chainCheck(cp *checkpoint, f *facts) finding {
	var p []string
	if s := cp.prep.Manifest.Subject; s == nil || s.Digest != cp.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared manifest subject: want capture manifest %s", cp.cap.Descriptor.Digest))
	}
	if s := cp.rep.Manifest.Subject; s == nil || s.Digest != cp.prep.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay manifest subject: want prepared manifest %s", cp.prep.Descriptor.Digest))
	}
	if cp.pdoc.Capture != cp.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared %s capture: %s, want %s", artifacts.DocTitle, cp.pdoc.Capture, cp.cap.Descriptor.Digest))
	}
	if cp.rdoc.Prepared != cp.prep.Descriptor.Digest || cp.rdoc.Capture != cp.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay %s: prepared %s capture %s, want %s and %s", artifacts.DocTitle, cp.rdoc.Prepared, cp.rdoc.Capture, cp.prep.Descriptor.Digest, cp.cap.Descriptor.Digest))
	}
	for _, st := range []struct {
		name string
		s    *artifacts.Stage
		pred *artifacts.Stage
		also *artifacts.Stage
	}{{"capture", cp.cap, nil, nil}, {"prepare", cp.prep, cp.cap, nil}, {"replay", cp.rep, cp.prep, cp.cap}} {
		r, err := st.s.Receipt()
		if err != nil {
			p = append(p, fmt.Sprintf("%s receipt: %v", st.name, err))
			continue
		}
		if r.Type != artifacts.StatementType || r.PredicateType != artifacts.ReceiptPredicate || r.Predicate.Stage != st.name {
			p = append(p, fmt.Sprintf("%s receipt: _type %q predicateType %q stage %q", st.name, r.Type, r.PredicateType, r.Predicate.Stage))
		}
		subj := map[string]string{}
		for _, s := range r.Subject {
			subj[s.Name] = s.Digest["sha256"]
		}
		for title, l := range st.s.Layers {
			if subj[title] != l.Digest.Encoded() {
				p = append(p, fmt.Sprintf("%s receipt: subject %q is %q, manifest layer has %s", st.name, title, subj[title], l.Digest))
			}
		}
		if len(subj) != len(st.s.Layers) {
			p = append(p, fmt.Sprintf("%s receipt: %d subjects, manifest has %d layers", st.name, len(subj), len(st.s.Layers)))
		}
		if st.pred == nil {
			continue
		}
		consumed := map[artifacts.Digest]time.Time{}
		allowed := map[artifacts.Digest]bool{}
		if st.s == cp.rep {
			for d := range cp.shardBlobs {
				allowed[d] = true
			}
		}
		for _, pst := range []*artifacts.Stage{st.pred, st.also} {
			if pst != nil {
				allowed[pst.Descriptor.Digest], allowed[pst.Manifest.Config.Digest] = true, true
				for _, l := range pst.Layers {
					allowed[l.Digest] = true
				}
			}
		}
		for _, d := range r.Predicate.ResolvedDependencies {
			consumed[d.Digest] = d.VerifiedAt
			if !allowed[d.Digest] {
				p = append(p, fmt.Sprintf("%s receipt: consumed %s (%s), which no predecessor stage produced", st.name, d.Name, artifacts.Short(d.Digest)))
			}
		}
		for _, pst := range []*artifacts.Stage{st.pred, st.also} {
			if pst == nil {
				continue
			}
			for title, l := range pst.Layers {
				if _, ok := consumed[l.Digest]; !ok {
					p = append(p, fmt.Sprintf("%s receipt: consumed blob %s (%s) was not recorded as verified", st.name, title, artifacts.Short(l.Digest)))
				}
			}
			if _, ok := consumed[pst.Descriptor.Digest]; !ok {
				p = append(p, fmt.Sprintf("%s receipt: predecessor manifest %s was not recorded as verified", st.name, artifacts.Short(pst.Descriptor.Digest)))
			}
		}
	}
	return finding{problems: p, summary: "manifest subjects, document links, receipt subjects and consumed digests"}
}
