package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// genKey runs tilepipe key generate into a temporary directory.
func genKey(t *testing.T, name string) (string, sign.Public) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	code, out, errs := tp(t, "key", "generate", "--output", path)
	if code != exitOK {
		t.Fatalf("key generate = exit %d: %s%s", code, out, errs)
	}
	pub, err := sign.LoadPublic(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if want := "key " + path + " (public: " + path + ".pub): id " + pub.ID + "\n"; out != want {
		t.Errorf("key generate printed %q, want %q", out, want)
	}
	return path, pub
}

// TestSignedCheckpoint: a run with --sign signs every receipt and the
// audit; the audit with --trust passes and names the key, and fails,
// naming the receipt, for each way a signature can be wrong: a forger's
// consistent re-hash (unsigned receipts), a key nobody trusts, a payload
// changed under its signature. Every receipt and the audit statement
// pass the in-toto attestation bindings' Statement.Validate(), their
// dependencies as ResourceDescriptors.
func TestSignedCheckpoint(t *testing.T) {
	long(t)
	key, pub := genKey(t, "key")
	_, other := genKey(t, "other")
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1", "--sign", key)
	if code != exitOK {
		t.Fatalf("run --sign = exit %d:\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "; signed, not verified (no --trust))") {
		t.Errorf("run's audit verdict does not say its receipts are signed but unverified:\n%s", out)
	}
	audit := func(dir string, trust ...string) (int, string) {
		args := []string{"audit", "--capture", filepath.Join(dir, "capture"), "--prepared", filepath.Join(dir, "prepared"), "--replay", filepath.Join(dir, "replay")}
		for _, k := range trust {
			args = append(args, "--trust", k)
		}
		code, out, errs := tp(t, args...)
		return code, out + errs
	}
	if code, out := audit(dir, other.Path, pub.Path); code != exitOK || !strings.Contains(out, "; signed by trusted key "+pub.ID[:16]+")") {
		t.Errorf("audit --trust = exit %d, want 0 and signed by trusted key %s:\n%s", code, pub.ID[:16], out)
	}

	stages := map[string]string{"capture": artifacts.CaptureType, "prepared": artifacts.PreparedType, "replay": artifacts.ReplayType, "audit": artifacts.AuditType}
	for name, typ := range stages {
		st, err := artifacts.OpenStage(filepath.Join(dir, name), typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		env, payload, err := st.Envelope()
		if err != nil || env == nil {
			t.Fatalf("%s: config is not an envelope (%v)", name, err)
		}
		if _, err := sign.Verify(env, []sign.Public{pub}); err != nil {
			t.Errorf("%s: envelope: %v", name, err)
		}
		var s intoto.Statement
		if err := protojson.Unmarshal(payload, &s); err != nil {
			t.Fatalf("%s: protojson: %v", name, err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: in-toto Statement.Validate() = %v", name, err)
		}
		deps, _ := s.GetPredicate().AsMap()["resolvedDependencies"].([]any)
		if name != "capture" && name != "audit" && len(deps) == 0 {
			t.Errorf("%s: no resolvedDependencies", name)
		}
		for _, d := range deps {
			b, _ := json.Marshal(d)
			var rd intoto.ResourceDescriptor
			if err := protojson.Unmarshal(b, &rd); err != nil || rd.Validate() != nil || len(rd.GetDigest()) != 1 {
				t.Errorf("%s: dependency %s is not a ResourceDescriptor with a digest (%v, %v)", name, b, err, rd.Validate())
				break
			}
		}
	}

	t.Run("a consistent re-hash leaves receipts unsigned", func(t *testing.T) {
		forged := copyRun(t, dir)
		forge(t, filepath.Join(forged, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {})
		code, out := audit(forged, pub.Path)
		want := "- replay receipt ("
		if code != exitFailure || !strings.Contains(out, "FAILED signatures") || !strings.Contains(out, want) || !strings.Contains(out, "): unsigned; --trust wants a signature by "+pub.ID[:16]+" ("+pub.Path+")") {
			t.Errorf("audit = exit %d, want 1, FAILED signatures and the replay receipt unsigned:\n%s", code, out)
		}
	})
	t.Run("a key nobody trusts", func(t *testing.T) {
		code, out := audit(dir, other.Path)
		if code != exitFailure || !strings.Contains(out, "- capture receipt (") || !strings.Contains(out, "): signed by key "+pub.ID[:16]+", which no --trust key is (trusted: "+other.ID[:16]+")") {
			t.Errorf("audit --trust other = exit %d, want 1 naming the capture receipt's key:\n%s", code, out)
		}
	})
	t.Run("payload changed under its signature", func(t *testing.T) {
		forged := copyRun(t, dir)
		forgeConfig(t, filepath.Join(forged, "prepared"), artifacts.PreparedType, func(env *dsse.Envelope) {
			p, _ := base64.StdEncoding.DecodeString(env.Payload)
			env.Payload = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(p), `"stage": "prepare"`, `"stage": "prepare "`, 1)))
		})
		code, out := audit(forged, pub.Path)
		if code != exitFailure || !strings.Contains(out, "- prepared receipt (") || !strings.Contains(out, "): the signature of trusted key "+pub.ID[:16]+" ("+pub.Path+") does not verify: changed after it was signed") {
			t.Errorf("audit = exit %d, want 1 naming the prepared receipt's bad signature:\n%s", code, out)
		}
	})
	t.Run("a key that is not a key", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errs := tp(t, "run", "--cohort", tinyCohort(t, gemm16), "--sign", bad, "--output", filepath.Join(t.TempDir(), "r"))
		if want := "tilepipe: error: run: --sign: key " + bad + ": no PEM block: want a \"PRIVATE KEY\" block (tilepipe key generate writes one)\n"; code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("run --sign BAD = exit %d, %q; want %d and %q", code, errs, exitUsage, want)
		}
	})
}

// forgeConfig edits a signed stage's envelope in place (the payload or
// the signatures) and commits the manifest again, keeping everything else.
func forgeConfig(t *testing.T, dir, typ string, edit func(*dsse.Envelope)) {
	t.Helper()
	st, err := artifacts.OpenStage(dir, typ, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := st.Envelope()
	if err != nil || env == nil {
		t.Fatalf("%s: no envelope (%v)", dir, err)
	}
	edit(env)
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Store
	for title, l := range st.Layers {
		s.Name(title, l)
	}
	for _, d := range []artifacts.Digest{st.Manifest.Config.Digest, st.Descriptor.Digest} {
		if err := os.Remove(s.Path(d)); err != nil {
			t.Fatal(err)
		}
	}
	cd, err := s.PutBytes(b, sign.MediaEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	var layers []ocispec.Descriptor
	for _, title := range st.Titles() {
		layers = append(layers, st.Layers[title])
	}
	if _, err := s.Commit(typ, cd, layers, st.Manifest.Subject); err != nil {
		t.Fatal(err)
	}
}
