package protocol

import (
	"strings"
	"testing"
)

const good = `{"protocol": 1, "name": "triton", "kind": "cubin", "version": "triton 3.6.0", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]}`

// TestParseDescription: every check, each fed an answer that breaks it,
// with the exact reason.
func TestParseDescription(t *testing.T) {
	if d, err := ParseDescription([]byte(good)); err != nil || d.Name != "triton" || d.Devices[0] != "cuda" {
		t.Fatalf("ParseDescription(good) = %+v, %v", d, err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown field", `"ops"`, `"opz"`, `stdout: want one JSON object (docs/protocol.md): json: unknown field "opz"`},
		{"trailing", `["cuda"]}`, `["cuda"]} {}`, "stdout: want one JSON object (docs/protocol.md), found more after it"},
		{"protocol", `"protocol": 1`, `"protocol": 2`, "protocol: want 1, got 2"},
		{"name", `"name": "triton"`, `"name": "../x"`, `name "../x": want letters, digits, '.', '_' or '-'`},
		{"kind", `"kind": "cubin"`, `"kind": "script"`, `kind "script": want object, process or cubin`},
		{"cubin on cpu", `"devices": ["cuda"]`, `"devices": ["cpu", "cuda"]`, "kind cubin: devices [cpu cuda], want [cuda] (a cubin runs on the GPU alone)"},
		{"unavailable without reason", `"available": true`, `"available": false`, "an unavailable route must give a reason"},
		{"device", `"kind": "cubin"`, `"kind": "object"`, ""},
		{"unknown device", `"kind": "cubin", "version": "triton 3.6.0", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]`, `"kind": "object", "version": "1", "available": true, "reason": "", "ops": ["add"], "devices": ["tpu"]`, `devices: "tpu": want cpu or cuda`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.from) {
				t.Fatalf("no %q in the good answer", tc.from)
			}
			_, err := ParseDescription([]byte(strings.Replace(good, tc.from, tc.to, 1)))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func FuzzParseDescription(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"protocol": 1, "name": "halide", "kind": "object", "version": "Halide 14.0.0", "available": false, "reason": "no", "ops": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescription(b)
		if err == nil && !ValidName(d.Name) {
			t.Fatalf("accepted name %q", d.Name)
		}
	})
}
