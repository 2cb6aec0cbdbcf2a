package sign

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

const statement = "application/vnd.in-toto+json"

// TestSealVerify: a key generated, loaded back from its files, signs a
// payload that its public key verifies; every way an envelope can fail a
// reviewer's trust gets its own reason.
func TestSealVerify(t *testing.T) {
	dir := t.TempDir()
	k, err := Generate(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "k")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := Generate(filepath.Join(dir, "k")); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Generate over an existing key = %v, want already exists", err)
	}
	loaded, err := Load(filepath.Join(dir, "k"))
	if err != nil || loaded.Public().ID != k.Public().ID {
		t.Fatalf("Load = %v, %v; want the key generated (%s)", loaded, err, k.Public().ID)
	}
	pub, err := LoadPublic(filepath.Join(dir, "k.pub"))
	if err != nil || pub.ID != k.Public().ID || len(pub.ID) != 64 {
		t.Fatalf("LoadPublic = %+v, %v; want ID %s", pub, err, k.Public().ID)
	}
	other, err := Generate(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)
	b, err := loaded.Seal(statement, payload)
	if err != nil {
		t.Fatal(err)
	}
	env, got, err := Parse(b, statement)
	if err != nil || string(got) != string(payload) || len(env.Signatures) != 1 || env.Signatures[0].KeyID != pub.ID {
		t.Fatalf("Parse = %+v, %q, %v", env, got, err)
	}
	if p, err := Verify(env, []Public{other.Public(), pub}); err != nil || p.ID != pub.ID {
		t.Errorf("Verify by its own key = %+v, %v; want %s", p, err, pub.ID)
	}

	tampered := *env
	tampered.Payload = base64.StdEncoding.EncodeToString([]byte(`{"_type":"forged"}`))
	unsigned := *env
	unsigned.Signatures = nil
	for _, tc := range []struct {
		name    string
		env     any
		trusted []Public
		want    string
	}{
		{"payload changed", &tampered, []Public{pub}, "the signature of trusted key " + pub.ID[:16] + " (" + pub.Path + ") does not verify: changed after it was signed"},
		{"no signature", &unsigned, []Public{pub}, "no signature"},
		{"another key", env, []Public{other.Public()}, "signed by key " + pub.ID[:16] + ", which no --trust key is (trusted: " + other.Public().ID[:16] + ")"},
	} {
		e := tc.env.(*dsse.Envelope)
		if _, err := Verify(e, tc.trusted); err == nil || err.Error() != tc.want {
			t.Errorf("%s: Verify = %v, want %s", tc.name, err, tc.want)
		}
	}

	for _, tc := range []struct {
		name, in, want string
	}{
		{"payload type", strings.Replace(string(b), statement, "text/plain", 1), `envelope payloadType "text/plain", want "` + statement + `"`},
		{"unknown field", strings.Replace(string(b), `"signatures"`, `"extra": 1, "signatures"`, 1), `envelope: json: unknown field "extra"`},
		{"trailing data", string(b) + "{}", "envelope: data after the JSON value"},
	} {
		if _, _, err := Parse([]byte(tc.in), statement); err == nil || err.Error() != tc.want {
			t.Errorf("Parse with %s = %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(dir, "k.pub")); err == nil || err.Error() != "key "+filepath.Join(dir, "k.pub")+`: PEM block "PUBLIC KEY", want "PRIVATE KEY"` {
		t.Errorf("Load of a public key = %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["payloadType"] != statement {
		t.Errorf("envelope JSON = %s (%v)", b, err)
	}
}
