package audit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/stats"
)

// Check outcomes.
const (
	Passed = "PASSED"
	Warned = "WARNED"
	Failed = "FAILED"
)

// Config names the three stages to audit.
type Config struct {
	Capture, Prepared, Replay string
	// Expect, when set, is the replay manifest digest the reviewer received
	// out of band (what tilepipe replay printed): the audit is pinned to
	// it, and another manifest fails. Without it, a checkpoint re-hashed
	// consistently from end to end cannot be told from the one that was
	// sent.
	Expect string
	// Trust are the public keys the reviewer trusts: with any, every
	// receipt must be signed by one of them (the signatures check).
	Trust    []sign.Public
	Progress *progress.Reporter
}

// Check is one audit finding with its evidence.
type Check struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Summary  string   `json:"summary"`
	Evidence []string `json:"evidence,omitempty"`
}

// Report is the audit predicate. Its verdict is about the checkpoint:
// "pass" when every digest, link and recomputation holds (Integrity
// "intact"). Claims are about rows: a row's claim is supported only when
// the checkpoint is intact and every visit of the row, and of its
// baseline row, passed every check; only a supported row publishes a ratio.
type Report struct {
	Verdict   string            `json:"verdict"`   // pass or fail: the checkpoint's integrity
	Integrity string            `json:"integrity"` // intact or broken
	Claims    Claims            `json:"claims"`
	Stages    map[string]string `json:"stages"` // stage -> manifest digest
	// Pinned: the audit compared the replay manifest with Expected, the
	// digest given with --expect (the "pin" check); without it a
	// consistent re-hash of the whole checkpoint passes.
	Pinned   bool   `json:"pinned"`
	Expected string `json:"expected,omitempty"`
	// Signed says whether the receipts were signed and by whom: Unsigned,
	// "signed by trusted key ID", or signed but not verified (no --trust).
	Signed string `json:"signed"`
	// FailedVisits are every visit that failed, with its reason.
	FailedVisits []FailedVisit  `json:"failedVisits"`
	Checks       []Check        `json:"checks"`
	Rows         []Row          `json:"rows"` // every (case, route) row of the replay, with the audit's marks
	Tool         artifacts.Tool `json:"tool"`
	Started      time.Time      `json:"startedOn"`
	Finished     time.Time      `json:"finishedOn"`
	// replay is the replay manifest's descriptor, the audit stage's
	// subject (WriteStage).
	replay ocispec.Descriptor
}

// Claims counts the rows whose claim the audit supports.
type Claims struct {
	Supported   int `json:"supported"`
	Unsupported int `json:"unsupported"`
}

// FailedVisit is one visit that did not pass.
type FailedVisit struct {
	Visit  int    `json:"visit"`
	Round  int    `json:"round"`
	Case   string `json:"case"`
	Route  string `json:"route"`
	Reason string `json:"reason"`
}

// auditor runs the table and keeps what it found, in order.
type auditor struct {
	checks   []Check
	progress *progress.Reporter
	// scope follows every check's name: " (shard I/N)" in the audit of a
	// shard of a merged replay (merged.go), else "".
	scope string
}

// maxEvidence bounds the evidence lines kept per check.
const maxEvidence = 20

// add keeps check name's finding as a Check (evidence bounded) and says
// it on the progress line.
func (a *auditor) add(name string, f finding) {
	c := Check{Name: name + a.scope, Status: Passed, Summary: f.summary}
	switch {
	case len(f.problems) > 0:
		c.Status, c.Evidence = Failed, f.problems
	case len(f.warnings) > 0:
		c.Status, c.Evidence = Warned, f.warnings
	}
	if len(c.Evidence) > maxEvidence {
		n := len(c.Evidence)
		c.Evidence = append(c.Evidence[:maxEvidence:maxEvidence], fmt.Sprintf("... and %d more", n-maxEvidence))
	}
	a.checks = append(a.checks, c)
	a.progress.Printf("audit: %s %s: %s", c.Status, c.Name, f.summary)
}

// run runs the checks of the table that perCapture selects (all of them
// when all is set) on cp, adding each finding, and returns the row marks
// they gave.
func (a *auditor) run(cp *checkpoint, f *facts, all, perCapture bool) map[artifacts.Pair][]string {
	marks := map[artifacts.Pair][]string{}
	for _, c := range checks {
		if !all && c.perCapture != perCapture {
			continue
		}
		fd := c.run(cp, f)
		if fd.skip {
			continue
		}
		a.add(c.name, fd)
		for k, m := range fd.marks {
			marks[k] = append(marks[k], m...)
		}
	}
	return marks
}

// Run audits the chain capture -> prepared -> replay. Findings are results;
// the error is for "could not audit at all". The first step is explicit:
// every blob of the three stages is re-hashed and their documents read
// (blobs); then the pin, the signatures, and the table of checks, each a
// function of the checkpoint and the facts derived from it once.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Stages: map[string]string{}, Tool: artifacts.ToolInfo(), Started: time.Now().UTC()}
	if cfg.Expect != "" {
		d, err := artifacts.ParseDigest(cfg.Expect)
		if err != nil {
			return nil, fmt.Errorf("--expect %q: want the replay manifest digest, sha256:<64 hex>: %w", cfg.Expect, err)
		}
		rep.Pinned, rep.Expected = true, string(d)
	}
	a := &auditor{progress: cfg.Progress}
	cp, blobs := openCheckpoint(cfg, rep)
	a.add("blobs", blobs)
	if rep.Pinned {
		a.add("pin", finding{problems: pin(rep.Expected, rep.Stages[artifacts.ReplayType]), summary: "the replay manifest is the one given with --expect, " + rep.Expected})
	}
	if len(blobs.problems) > 0 {
		return a.finish(cp, rep), nil
	}
	signed, sig := signaturesCheck(cp, cfg.Trust)
	rep.Signed = signed
	a.add("signatures", sig)
	if cp.rdoc.Merge != nil {
		a.merged(cp, cfg, rep)
		return a.finish(cp, rep), nil
	}
	marks := a.run(cp, captureFacts(cp).forReplay(cp), true, false)
	rep.Rows = rowsOf(cp.rdoc)
	for i, r := range rep.Rows {
		rep.Rows[i].Marks = append(rep.Rows[i].Marks, marks[r.Pair()]...)
	}
	return a.finish(cp, rep), nil
}

// finish gives the report its checks, its verdict, its failed visits and
// each row's claim.
func (a *auditor) finish(cp *checkpoint, rep *Report) *Report {
	rep.Checks = a.checks
	rep.Verdict, rep.Integrity = "pass", "intact"
	for _, c := range a.checks {
		if c.Status == Failed {
			rep.Verdict, rep.Integrity = "fail", "broken"
		}
	}
	rep.FailedVisits = []FailedVisit{}
	for _, v := range cp.rdoc.Visits {
		if v.Status != artifacts.StatusPassed {
			rep.FailedVisits = append(rep.FailedVisits, FailedVisit{Visit: v.Index, Round: v.Round, Case: v.Case, Route: v.Route, Reason: v.Reason})
		}
	}
	claims(cp.rdoc, rep)
	rep.Finished = time.Now().UTC()
	return rep
}

// openCheckpoint opens the three stages, re-hashing every blob, and reads
// their documents: the checkpoint, and the blobs check's finding (a
// checkpoint with problems is not to be read further).
func openCheckpoint(cfg Config, rep *Report) (*checkpoint, finding) {
	cp := &checkpoint{capVerified: map[artifacts.Digest]bool{}, prepVerified: map[artifacts.Digest]bool{}}
	n := 0
	whole, err := artifacts.OpenCheckpoint(cfg.Capture, cfg.Prepared, cfg.Replay, func(typ string, d ocispec.Descriptor) {
		n++
		switch typ {
		case artifacts.CaptureType:
			cp.capVerified[d.Digest] = true
		case artifacts.PreparedType:
			cp.prepVerified[d.Digest] = true
		}
	})
	var problems []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			problems = append(problems, e.Error())
		}
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	cp.cap, cp.prep, cp.rep = whole.Capture, whole.Prepared, whole.Replay
	cp.cdoc, cp.pdoc, cp.rdoc = whole.CaptureDoc, whole.PreparedDoc, whole.ReplayDoc
	for typ, st := range map[string]*artifacts.Stage{artifacts.CaptureType: cp.cap, artifacts.PreparedType: cp.prep, artifacts.ReplayType: cp.rep} {
		if st != nil {
			rep.Stages[typ] = string(st.Descriptor.Digest)
		}
	}
	if st := cp.rep; st != nil {
		rep.replay = ocispec.Descriptor{MediaType: st.Descriptor.MediaType, Digest: st.Descriptor.Digest, Size: st.Descriptor.Size, ArtifactType: st.Descriptor.ArtifactType}
	}
	return cp, finding{problems: problems, summary: fmt.Sprintf("re-hashed %d blobs (manifests, receipts, layers) of 3 stages; their documents read strictly, of schema %d, and every stage's invariants hold (artifacts.ValidateStage)", n, artifacts.DocSchema)}
}

// MarshalStatement wraps the report as an in-toto Statement about the three
// stage manifests.
func MarshalStatement(r *Report) ([]byte, error) {
	return artifacts.MarshalJSON(statement(r))
}

// statement is the report as an in-toto Statement whose subjects are the
// stage manifests it audited (the digests Run parsed when it opened them).
func statement(r *Report) artifacts.Statement[*Report] {
	st := artifacts.Statement[*Report]{Type: artifacts.StatementType, PredicateType: artifacts.AuditPredicate, Predicate: r}
	names := make([]string, 0, len(r.Stages))
	for k := range r.Stages {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		_, hex, _ := strings.Cut(r.Stages[k], ":")
		st.Subject = append(st.Subject, artifacts.Subject{Name: k, Digest: map[string]string{"sha256": hex}})
	}
	return st
}

// Markdown renders the report for people: the verdicts, then every failed
// visit with its reason, then the rows (a ratio only where the claim is
// supported), then the checks and their evidence.
func Markdown(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# tilepipe audit: checkpoint %s, %d of %d claims supported\n\n", strings.ToUpper(r.Integrity), r.Claims.Supported, r.Claims.Supported+r.Claims.Unsupported)
	if r.Pinned {
		fmt.Fprintf(&b, "Pinned to `%s`, the replay manifest given with --expect.\n\n", r.Expected)
	} else {
		b.WriteString("Not pinned: a consistent re-hash of the whole checkpoint cannot be told apart without --expect.\n\n")
	}
	if r.Signed != "" {
		fmt.Fprintf(&b, "Receipts: %s.\n\n", r.Signed)
	}
	if len(r.FailedVisits) > 0 {
		fmt.Fprintf(&b, "## failed visits (%d)\n\n| visit | round | case | route | reason |\n|---|---|---|---|---|\n", len(r.FailedVisits))
		for _, v := range r.FailedVisits {
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", v.Visit, v.Round+1, v.Case, v.Route, strings.ReplaceAll(v.Reason, "|", `\|`))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("Every visit passed.\n\n")
	}
	b.WriteString("## stages\n\n")
	for _, k := range []string{artifacts.CaptureType, artifacts.PreparedType, artifacts.ReplayType} {
		if d, ok := r.Stages[k]; ok {
			fmt.Fprintf(&b, "- %s `%s`\n", k, d)
		}
	}
	if len(r.Rows) > 0 {
		b.WriteString("\n## claims\n\n| case | route | status | claim | ratio [interval, at the level results.md gives] | why not / marks |\n|---|---|---|---|---|---|\n")
		for _, row := range r.Rows {
			claim, ratio := "unsupported", "-"
			if row.Supported {
				claim = "supported"
				switch {
				case row.Ratio != nil && row.Ratio.Verdict == stats.TooFew:
					ratio = fmt.Sprintf("%.3f %s", row.Ratio.Median, row.Ratio.Verdict)
				case row.Ratio != nil:
					ratio = fmt.Sprintf("%.3f [%.3f – %.3f] %s", row.Ratio.Median, row.Ratio.Lo, row.Ratio.Hi, row.Ratio.Verdict)
				}
			}
			why := strings.Join(append(slices.Clone(row.Marks), row.Why), "; ")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Case, row.Route, row.Status, claim, ratio, strings.Trim(strings.ReplaceAll(why, "|", `\|`), "; "))
		}
	}
	b.WriteString("\n## checks\n\n| check | status | summary |\n|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, c.Status, strings.ReplaceAll(c.Summary, "|", `\|`))
	}
	for _, c := range r.Checks {
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, "\n## %s: %s\n\n", c.Name, c.Status)
			for _, e := range c.Evidence {
				fmt.Fprintf(&b, "- %s\n", e)
			}
		}
	}
	return b.String()
}
