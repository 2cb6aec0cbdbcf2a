package audit

import "github.com/tilepipe/tilepipe/artifacts"

// chainCheck checks subjects, document links, receipts and consumption:
// the checkpoint's own invariants (artifacts.ChainProblems), a merged
// replay's receipt allowed its shards' products.
func chainCheck(cp *checkpoint, f *facts) finding {
	whole := &artifacts.Checkpoint{Capture: cp.cap, Prepared: cp.prep, Replay: cp.rep, CaptureDoc: cp.cdoc, PreparedDoc: cp.pdoc, ReplayDoc: cp.rdoc}
	return finding{problems: artifacts.ChainProblems(whole, cp.shardBlobs), summary: "manifest subjects, document links, receipt subjects and consumed digests"}
}
