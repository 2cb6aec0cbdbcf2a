package artifacts

import (
	"reflect"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestCheckpointValid: TestCheckpoint's three stages open as one
// checkpoint, every blob re-hashed (each seen with its stage's type), and
// their links hold.
func TestCheckpointValid(t *testing.T) {
	c, p, r := TestCheckpoint(t)
	seen := map[string]int{}
	cp, err := OpenCheckpoint(c, p, r, func(typ string, _ ocispec.Descriptor) { seen[typ]++ })
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateCheckpoint(cp, nil); err != nil {
		t.Errorf("ValidateCheckpoint = %v, want nil", err)
	}
	for _, typ := range []string{CaptureType, PreparedType, ReplayType} {
		if seen[typ] < 3 { // manifest, config (receipt), document at least
			t.Errorf("%d blobs of %s seen re-hashed, want every one", seen[typ], typ)
		}
	}
}

// TestCheckpointOpenKeepsWhatOpens: a stage that does not open is named
// and left nil; the others are kept.
func TestCheckpointOpenKeepsWhatOpens(t *testing.T) {
	c, p, _ := TestCheckpoint(t)
	cp, err := OpenCheckpoint(c, p, c, nil) // the capture where the replay should be
	if err == nil || cp.Capture == nil || cp.Prepared == nil || cp.Replay != nil {
		t.Fatalf("OpenCheckpoint(capture as replay) = %+v, %v; want the replay refused, the others kept", cp, err)
	}
	if len(err.(interface{ Unwrap() []error }).Unwrap()) != 1 {
		t.Errorf("errors %q, want one, the replay's", err)
	}
}

// TestChainProblems feeds each link a violation and asserts its exact
// problem.
func TestChainProblems(t *testing.T) {
	c, p, r := TestCheckpoint(t)
	stray := Digest("sha256:" + strings.Repeat("ab", 32))
	var capDoc Digest
	open := func() *Checkpoint {
		cp, err := OpenCheckpoint(c, p, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		capDoc = cp.Capture.Layers[DocTitle].Digest
		return cp
	}
	for _, tc := range []struct {
		name string
		edit func(cp *Checkpoint)
		want func(cp *Checkpoint) []string
	}{
		{"prepared without its subject", func(cp *Checkpoint) { cp.Prepared.Manifest.Subject = nil }, func(cp *Checkpoint) []string {
			return []string{"prepared manifest subject: want capture manifest " + string(cp.Capture.Descriptor.Digest)}
		}},
		{"replay naming another prepared stage", func(cp *Checkpoint) { cp.ReplayDoc.Prepared = cp.Capture.Descriptor.Digest }, func(cp *Checkpoint) []string {
			d := string(cp.Capture.Descriptor.Digest)
			return []string{"replay tilepipe.json: prepared " + d + " capture " + d + ", want " + string(cp.Prepared.Descriptor.Digest) + " and " + d}
		}},
		{"a capture layer no receipt names", func(cp *Checkpoint) {
			cp.Capture.Layers["stray"] = ocispec.Descriptor{Digest: stray}
		}, func(cp *Checkpoint) []string {
			return []string{
				`capture receipt: subject "stray" is "", manifest layer has ` + string(stray),
				"capture receipt: 1 subjects, manifest has 2 layers",
				"prepare receipt: consumed blob stray (" + Short(stray) + ") was not recorded as verified",
				"replay receipt: consumed blob stray (" + Short(stray) + ") was not recorded as verified",
			}
		}},
		{"a prepared receipt that consumed what no predecessor made", func(cp *Checkpoint) {
			delete(cp.Capture.Layers, DocTitle)
		}, func(cp *Checkpoint) []string {
			d := Short(capDoc)
			return []string{
				"capture receipt: 1 subjects, manifest has 0 layers",
				"prepare receipt: consumed tilepipe.json (" + d + "), which no predecessor stage produced",
				"replay receipt: consumed tilepipe.json (" + d + "), which no predecessor stage produced",
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := open()
			tc.edit(cp)
			if got, want := ChainProblems(cp, nil), tc.want(cp); !reflect.DeepEqual(got, want) {
				t.Errorf("ChainProblems =\n%q\nwant\n%q", got, want)
			}
			if err := ValidateCheckpoint(cp, nil); err == nil || err.Error() != strings.Join(tc.want(cp), "\n") {
				t.Errorf("ValidateCheckpoint = %v, want the problems joined", err)
			}
		})
	}
}

// TestChainAlso: what a merged replay's receipt consumed of its shards
// (also) is allowed; the same without also is a problem.
func TestChainAlso(t *testing.T) {
	c, p, r := TestCheckpoint(t)
	cp, err := OpenCheckpoint(c, p, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	shard := cp.Capture.Layers[DocTitle].Digest
	delete(cp.Capture.Layers, DocTitle) // the replay's receipt consumed it: from a shard, say
	delete(cp.Prepared.Layers, DocTitle)
	for _, tc := range []struct {
		also map[Digest]bool
		want bool
	}{{nil, true}, {map[Digest]bool{shard: true}, false}} {
		got := false
		for _, p := range ChainProblems(cp, tc.also) {
			got = got || strings.HasPrefix(p, "replay receipt: consumed tilepipe.json ("+Short(shard)+")")
		}
		if got != tc.want {
			t.Errorf("also %v: the replay's consumption named %v, want %v", tc.also, got, tc.want)
		}
	}
}

// TestNewReceipt: a receipt begins with its stage, tool and machine; a
// stage after the capture names its predecessor's manifest with the time
// its deps recorded it verified (zero where they did not).
func TestNewReceipt(t *testing.T) {
	c, _, _ := TestCheckpoint(t)
	var deps Deps
	var cdoc CaptureDoc
	capSt, err := ReadStage(c, &cdoc, deps.Verified)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC()
	r := NewReceipt("prepare", start, map[string]any{"cc": "cc"}, capSt, &deps)
	if r.Stage != "prepare" || r.StartedOn != start || r.Parameters["cc"] != "cc" || r.Tool.Name == "" {
		t.Errorf("NewReceipt = %+v", r)
	}
	if p := r.Predecessor; p == nil || p.Name != "capture manifest" || p.Digest != capSt.Descriptor.Digest || p.VerifiedAt.IsZero() {
		t.Errorf("predecessor %+v, want the capture manifest verified", p)
	}
	if r := NewReceipt("capture", start, nil, nil, nil); r.Predecessor != nil {
		t.Errorf("a capture's receipt names predecessor %+v", r.Predecessor)
	}
	if r := NewReceipt("prepare", start, nil, capSt, &Deps{}); r.Predecessor == nil || !r.Predecessor.VerifiedAt.IsZero() {
		t.Errorf("a predecessor its deps did not record: %+v, want its verification time zero", r.Predecessor)
	}
}
