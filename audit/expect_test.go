package audit

import (
	"reflect"
	"testing"
)

func TestPin(t *testing.T) {
	const a, b = "sha256:" + "aa00000000000000000000000000000000000000000000000000000000000000", "sha256:" + "bb00000000000000000000000000000000000000000000000000000000000000"
	tests := []struct {
		want, got string
		problems  []string
	}{
		{a, a, nil},
		{a, b, []string{"replay manifest " + b + ", expected " + a + " (--expect): this is not the checkpoint that was sent"}},
		{a, "", []string{"the replay stage did not verify, so its manifest cannot be compared with the expected " + a}},
	}
	for _, tt := range tests {
		if got := pin(tt.want, tt.got); !reflect.DeepEqual(got, tt.problems) {
			t.Errorf("pin(%s, %q) = %q, want %q", tt.want, tt.got, got, tt.problems)
		}
	}
	if got := (&Report{}).Pin(); got != NotPinned {
		t.Errorf("Report{}.Pin() = %q, want %q", got, NotPinned)
	}
	if got := (&Report{Pinned: true, Expected: a}).Pin(); got != "pinned to "+a {
		t.Errorf("Report{Pinned}.Pin() = %q, want pinned to %s", got, a)
	}
}
