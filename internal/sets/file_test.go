package sets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInputsFile: DrawFile writes seeds for FileRounds rounds into a new
// file, ReadFile gives the first rounds of them; an existing file is not
// overwritten, and a file of too few rounds, an unknown field, too many
// bytes or none at all is refused with what was expected.
func TestInputsFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, InputsFile)
	if err := DrawFile(p); err != nil {
		t.Fatal(err)
	}
	s, d, err := ReadFile(p, 6)
	if err != nil || len(s.Rounds) != 6 || s.Replay == 0 || d == "" {
		t.Fatalf("ReadFile(6 rounds) = %+v, %q, %v", s, d, err)
	}
	if all, _, err := ReadFile(p, FileRounds); err != nil || all.Rounds[5] != s.Rounds[5] {
		t.Errorf("ReadFile(%d rounds) = %v, and round 5's seed differs", FileRounds, err)
	}
	if err := DrawFile(p); err == nil || !strings.Contains(err.Error(), "exists; input seeds are drawn into a new file") {
		t.Errorf("DrawFile over an existing file = %v", err)
	}
	write := func(name, body string) string {
		q := filepath.Join(dir, name)
		if err := os.WriteFile(q, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return q
	}
	for _, tc := range []struct{ path, want string }{
		{write("few.json", `{"replay": 1, "rounds": [1, 2]}`), "rounds: seeds for 2 rounds, the replay plans 6"},
		{write("field.json", `{"replay": 1, "rounds": [1, 2, 3, 4, 5, 6], "chosen": true}`), `json: unknown field "chosen"`},
		{write("big.json", `{"replay": 1, "rounds": [`+strings.Repeat("1, ", 30000)+`1]}`), "more than 65536 bytes: not an inputs file"},
		{filepath.Join(dir, "none.json"), "no such file or directory"},
	} {
		if _, _, err := ReadFile(tc.path, 6); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--inputs") {
			t.Errorf("ReadFile(%s) = %v, want %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}
