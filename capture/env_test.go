package capture

import "testing"

// TestEnvForKind: only an object build's response carries env, and only
// artifacts.ObjectEnv's variables; a process or cubin build that sends one
// fails rather than have it ignored (object builds go through a whole
// capture in TestObjectEnv).
func TestEnvForKind(t *testing.T) {
	for _, tc := range []struct {
		kind string
		env  map[string]string
		want string
	}{
		{"object", map[string]string{"OPENBLAS_CORETYPE": "Haswell"}, ""},
		{"object", nil, ""},
		{"object", map[string]string{"LD_PRELOAD": "x.so"}, "response env.LD_PRELOAD: an object build's visits run tilepipe's timer, which takes only OPENBLAS_CORETYPE"},
		{"process", nil, ""},
		{"process", map[string]string{"OPENBLAS_CORETYPE": "Haswell"}, "response env: a process build sets no variables here (an object build's visits may take OPENBLAS_CORETYPE)"},
		{"cubin", map[string]string{}, "response env: a cubin build sets no variables here (an object build's visits may take OPENBLAS_CORETYPE)"},
	} {
		err := envForKind(tc.kind, tc.env)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("envForKind(%s, %v) = %q, want %q", tc.kind, tc.env, got, tc.want)
		}
	}
}
