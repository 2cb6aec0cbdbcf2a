package artifacts_test

import (
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/tilepipe/tilepipe/artifacts"
)

// TestMarshalJSONLists: a nil slice is written [] wherever encoding/json
// would write null (a field, a map value, inside a pointer or an
// interface), an omitempty one stays omitted, and values that marshal
// themselves (time, a dependency) and []byte are left to their own
// encoding; the input is not modified.
func TestMarshalJSONLists(t *testing.T) {
	type inner struct {
		L []int `json:"l"`
	}
	type doc struct {
		A    []string             `json:"a"`
		B    []string             `json:"b,omitempty"`
		P    *inner               `json:"p"`
		Nilp *inner               `json:"nilp"`
		M    map[string]any       `json:"m"`
		E    []inner              `json:"e"`
		Raw  []byte               `json:"raw"`
		At   time.Time            `json:"at"`
		Dep  artifacts.Dependency `json:"dep"`
	}
	in := doc{P: &inner{}, M: map[string]any{"x": []string(nil), "y": 1}, E: []inner{{}}, Raw: []byte("hi"),
		At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Dep: artifacts.Dependency{Name: "d", Digest: digest.FromString("d"), VerifiedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}
	b, err := artifacts.MarshalLine(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[],"p":{"l":[]},"nilp":null,"m":{"x":[],"y":1},"e":[{"l":[]}],"raw":"aGk=","at":"2026-12-01T00:00:00Z","dep":{"name":"d","digest":{"sha256":"` + digest.FromString("d").Encoded() + `"},"annotations":{"verifiedAt":"2026-12-01T00:00:00Z"}}}`
	if string(b) != want {
		t.Errorf("MarshalLine =\n%s\nwant\n%s", b, want)
	}
	if in.A != nil || in.P.L != nil || in.M["x"].([]string) != nil {
		t.Errorf("MarshalLine modified its input: %+v", in)
	}
}
