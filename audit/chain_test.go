package audit

import (
	"reflect"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// TestOpenAndChainHandMade: the audit's first step and its chain check on
// a small valid checkpoint made by hand (artifacts.TestCheckpoint, no
// route run): every stage opens, its manifest recorded; the chain holds;
// a replay that names another prepared stage is the chain's problem.
func TestOpenAndChainHandMade(t *testing.T) {
	c, p, r := artifacts.TestCheckpoint(t)
	rep := &Report{Stages: map[string]string{}}
	cp, fd := openCheckpoint(Config{Capture: c, Prepared: p, Replay: r}, rep)
	if len(fd.problems) > 0 || cp.rep == nil || len(rep.Stages) != 3 || rep.Stages[artifacts.ReplayType] != string(cp.rep.Descriptor.Digest) {
		t.Fatalf("openCheckpoint = %q, stages %v", fd.problems, rep.Stages)
	}
	if got := chainCheck(cp, nil).problems; len(got) > 0 {
		t.Errorf("chainCheck(a valid checkpoint) = %q, want none", got)
	}
	cp.rdoc.Prepared = cp.cap.Descriptor.Digest
	d := string(cp.cap.Descriptor.Digest)
	want := []string{"replay tilepipe.json: prepared " + d + " capture " + d + ", want " + string(cp.prep.Descriptor.Digest) + " and " + d}
	if got := chainCheck(cp, nil).problems; !reflect.DeepEqual(got, want) {
		t.Errorf("chainCheck(replay names the capture as its prepared stage) =\n%q\nwant\n%q", got, want)
	}
	// The replay directory given as the prepared one: the blobs check
	// names it, and the stages that open are kept.
	if _, fd := openCheckpoint(Config{Capture: c, Prepared: r, Replay: r}, &Report{Stages: map[string]string{}}); len(fd.problems) != 1 {
		t.Errorf("openCheckpoint(replay as prepared) problems %q, want one", fd.problems)
	}
}
