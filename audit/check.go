package audit

import (
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/oracle"
)

// checkpoint is what every check reads: the three stages, opened with
// every blob re-hashed (openCheckpoint), and their documents. In the audit
// of a merged replay each shard is a checkpoint of its own that shares the
// capture and the prepared stage.
type checkpoint struct {
	cap, prep, rep *artifacts.Stage
	cdoc           artifacts.CaptureDoc
	pdoc           artifacts.PreparedDoc
	rdoc           artifacts.ReplayDoc
	// capVerified and prepVerified are the digests openCheckpoint
	// re-hashed in the capture and the prepared stage.
	capVerified, prepVerified map[artifacts.Digest]bool
	// shardBlobs are, in the audit of a merged replay, the shard products
	// its receipt may name as consumed (the shards' manifests and sample
	// tables); nil otherwise.
	shardBlobs map[artifacts.Digest]bool
}

// facts are what several checks share, derived once from the checkpoint
// before any check runs (captureFacts, then forReplay), so no check
// depends on another having run first.
type facts struct {
	// refs is every captured case's FP64 reference, recomputed here from
	// its generator and seed: the oracle check compares it with the
	// stored packet, the outputs check judges the stored outputs with it.
	refs map[string]reference
	// visits are the passed visits whose sample tables could be read,
	// rows their tables (same order); unread names each table that could
	// not be read.
	visits []artifacts.VisitResult
	rows   [][]samples.Row
	unread []string
}

// reference is one case's recomputed inputs and FP64 reference, or why
// there is none.
type reference struct {
	in    []oracle.Tensor
	inErr error // why the inputs could not be regenerated
	exp   []oracle.Expected
	err   error // why there is no reference: inErr, or the reference's own
}

// captureFacts are the facts of cp's capture: every case's reference.
// A merged replay's shards share them.
func captureFacts(cp *checkpoint) *facts {
	return &facts{refs: references(cp.cdoc)}
}

// forReplay is f with the passed rows of cp's replay.
func (f *facts) forReplay(cp *checkpoint) *facts {
	g := &facts{refs: f.refs}
	for _, v := range cp.rdoc.Visits {
		if v.Status != artifacts.StatusPassed {
			continue
		}
		vr, err := readRows(cp.rep, v.Samples)
		if err != nil {
			g.unread = append(g.unread, fmt.Sprintf("visit %d samples: %v", v.Index, err))
			continue
		}
		g.visits, g.rows = append(g.visits, v), append(g.rows, vr)
	}
	return g
}

// references recomputes every captured case's inputs and FP64 reference.
func references(cdoc artifacts.CaptureDoc) map[string]reference {
	out := map[string]reference{}
	for _, c := range cdoc.Cases {
		var r reference
		r.in, r.inErr = oracle.Generate(c.Case)
		r.err = r.inErr
		if r.err == nil {
			r.exp, r.err = oracle.Reference(c.Case, r.in)
		}
		out[c.Case.ID] = r
	}
	return out
}

// passedRows are the passed visits with their sample tables, and the
// tables that could not be read.
func (f *facts) passedRows() ([]artifacts.VisitResult, [][]samples.Row, []string) {
	return f.visits, f.rows, f.unread
}

// finding is what one check returns: what fails it, what warns, the line
// that says what it checked, and the marks it puts on rows.
type finding struct {
	problems, warnings []string
	summary            string
	marks              map[artifacts.Pair][]string
	// skip: the check had nothing to look at (a replay with no cubin
	// entry) and is not listed.
	skip bool
}

// check is one row of the audit's table: a check family's name and its
// function of the checkpoint and the facts. perCapture checks read only
// the capture and the prepared stage: a merged replay's audit runs them
// once, and every other check once per shard.
type check struct {
	name       string
	run        func(*checkpoint, *facts) finding
	perCapture bool
}

// checks is the audit's table, in the order the report lists them. The
// blobs, pin and signatures checks come before it (openCheckpoint, pin,
// signaturesCheck): nothing else is read until every blob is re-hashed.
var checks = []check{
	{name: "chain", run: chainCheck},
	{name: "cohort", run: cohortCheck, perCapture: true},
	{name: "routes", run: routesCheck, perCapture: true},
	{name: "cubin chain", run: cubinChainCheck, perCapture: true},
	{name: "inputs", run: inputsCheck, perCapture: true},
	{name: "oracle", run: oracleCheck, perCapture: true},
	{name: "outputs", run: outputsCheck},
	{name: "summaries", run: summariesCheck},
	{name: "records", run: recordsCheck},
	{name: "journal", run: journalCheck},
	{name: "results table", run: resultsCheck},
	{name: "stopping rule", run: stoppingCheck},
	{name: "balance", run: balanceCheck},
	{name: "time windows", run: timeWindowsCheck},
	{name: "physical floor", run: floorsCheck},
	{name: "telemetry", run: telemetryCheck},
	{name: "containment", run: containmentCheck},
}

// device is the device case id runs on ("cpu" for a case the capture
// does not have: its rows fail elsewhere).
func (cp *checkpoint) device(id string) string {
	if c := cp.capturedCase(id); c != nil {
		return c.Case.DeviceOf()
	}
	return oracle.DeviceCPU
}

// capturedCase is the capture's case id, or nil.
func (cp *checkpoint) capturedCase(id string) *artifacts.CapturedCase {
	for i := range cp.cdoc.Cases {
		if cp.cdoc.Cases[i].Case.ID == id {
			return &cp.cdoc.Cases[i]
		}
	}
	return nil
}

// entry is the prepared stage's entry for case id and route, or nil.
func (cp *checkpoint) entry(id, route string) *artifacts.Prepared {
	for i := range cp.pdoc.Entries {
		if e := &cp.pdoc.Entries[i]; e.Case == id && e.Route == route {
			return e
		}
	}
	return nil
}

// readCapture reads a capture blob that the audit re-hashed when it opened
// the stage.
func (cp *checkpoint) readCapture(d artifacts.Digest, limit int64) ([]byte, error) {
	if !cp.cap.Has(d) {
		return nil, fmt.Errorf("blob %s is not a layer of the capture", artifacts.Short(d))
	}
	return cp.cap.Store.ReadVerified(d, "capture output", limit)
}
