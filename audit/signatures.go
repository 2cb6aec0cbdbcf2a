package audit

import (
	"fmt"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
)

// Unsigned is Report.Signed for a checkpoint whose receipts carry no
// signature.
const Unsigned = "unsigned"

// signaturesCheck checks each stage's receipt signature (DSSE, artifacts/sign)
// against the keys the reviewer trusts. With --trust every receipt must be
// signed by one of them: a receipt unsigned, signed by another key or
// changed after it was signed fails, named. Without --trust nothing can be
// verified: the check says which receipts carry signatures, by which
// keys, and the verdict says "unsigned" where none does. It returns that
// word for the verdict, and its finding.
func signaturesCheck(cp *checkpoint, trust []sign.Public) (string, finding) {
	var p, signed, unsigned []string
	by := map[string]bool{}
	for _, st := range []struct {
		name string
		s    *artifacts.Stage
	}{{"capture", cp.cap}, {"prepared", cp.prep}, {"replay", cp.rep}} {
		env, _, err := st.s.Envelope()
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("%s receipt: %v", st.name, err))
			continue
		case env == nil:
			unsigned = append(unsigned, st.name)
			if len(trust) > 0 {
				p = append(p, fmt.Sprintf("%s receipt (%s): unsigned; --trust wants a signature by %s", st.name, artifacts.Short(st.s.Manifest.Config.Digest), keyList(trust)))
			}
			continue
		}
		signed = append(signed, st.name)
		if len(trust) == 0 {
			for _, id := range sign.KeyIDs(env) {
				by[sign.Short(id)] = true
			}
			continue
		}
		k, err := sign.Verify(env, trust)
		if err != nil {
			p = append(p, fmt.Sprintf("%s receipt (%s): %v", st.name, artifacts.Short(st.s.Manifest.Config.Digest), err))
			continue
		}
		by[sign.Short(k.ID)] = true
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	var verdict, summary string
	var w []string
	switch {
	case len(signed) == 0:
		verdict, summary = Unsigned, "no receipt is signed"
	case len(trust) == 0:
		verdict = "signed, not verified (no --trust)"
		summary = fmt.Sprintf("%s signed by key %s, not verified: give --trust PUBKEY", strings.Join(signed, ", "), strings.Join(keys, ", "))
		if len(unsigned) > 0 {
			w = append(w, fmt.Sprintf("%s unsigned", strings.Join(unsigned, ", ")))
		}
	case len(p) == 0:
		verdict = "signed by trusted key " + strings.Join(keys, ", ")
		summary = "capture, prepared and replay receipts signed by trusted key " + strings.Join(keys, ", ")
	default:
		verdict = "signatures FAILED"
		summary = "capture, prepared and replay receipts against the trusted keys " + keyList(trust)
	}
	return verdict, finding{problems: p, warnings: w, summary: summary}
}

func keyList(ks []sign.Public) string {
	var s []string
	for _, k := range ks {
		s = append(s, sign.Short(k.ID)+" ("+k.Path+")")
	}
	return strings.Join(s, ", ")
}
