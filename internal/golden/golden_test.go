package golden

import (
	"fmt"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct{ got, want, msg string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nc\n", "a\nb\n", `line 2: got "c", want "b"`},
		{"a\n", "a\nb\n", `line 2: got "", want "b"`},
		{"a\nb\n", "a\nb", `line 3: got "", want end of output`},
	} {
		if msg := Diff(tc.got, tc.want); msg != tc.msg {
			t.Errorf("Diff(%q, %q) = %q, want %q", tc.got, tc.want, msg, tc.msg)
		}
	}
}

// TestCheck: a file that matches passes; one that differs fails, naming
// the file and the first differing line (seen through a recorder).
func TestCheck(t *testing.T) {
	t.Chdir(t.TempDir())
	*update = true
	Check(t, "x", []byte("one\ntwo\n"))
	*update = false
	Check(t, "x", []byte("one\ntwo\n"))
	r := &recorder{TB: t}
	Check(r, "x", []byte("one\nthree\n"))
	if want := "golden testdata/x.golden: line 2: got \"three\", want \"two\"\n(go test -run 'TestCheck' -update accepts the new output; git diff shows it)"; r.msg != want {
		t.Errorf("Check of a differing output reported %q, want %q", r.msg, want)
	}
}

type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Errorf(format string, a ...any) { r.msg = fmtS(format, a...) }

func fmtS(format string, a ...any) string { return fmt.Sprintf(format, a...) }
