package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/transfer"
)

// registry is a real OCI registry (Debian's docker-registry, the CNCF
// distribution 2.8) on a loopback port for one test.
type registry struct {
	host string // 127.0.0.1:PORT
	root string // its storage
}

// startRegistry starts docker-registry with a configuration of its own
// (storage in a temporary directory, no auth) and waits until it answers.
// Without the program the test is skipped, unless make test asks for every
// part (TILEPIPE_REQUIRE_ROUTES=1): its Makefile installs it.
func startRegistry(t *testing.T) *registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
			t.Fatalf("docker-registry not found, and TILEPIPE_REQUIRE_ROUTES=1 (make deps installs Debian's docker-registry): %v", err)
		}
		t.Skipf("docker-registry not found: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	r := &registry{host: host, root: filepath.Join(dir, "data")}
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", r.root, host)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			t.Fatalf("docker-registry on %s did not answer in 20 s: %v\n%s", host, err, b)
		}
	}
	// Credentials come from the Docker configuration only: an empty one.
	t.Setenv("DOCKER_CONFIG", filepath.Join(dir, "docker"))
	return r
}

// blob is the file the registry keeps a blob's bytes in.
func (r *registry) blob(d artifacts.Digest) string {
	h := d.Encoded()
	return filepath.Join(r.root, "docker", "registry", "v2", "blobs", "sha256", h[:2], h, "data")
}

// TestPushPull: a signed checkpoint pushed to a real registry is there as
// the chain capture <- prepared <- replay <- audit (each stage a referrer
// of the one before, as oras discover lists them), pulls into a new
// directory byte for byte, and audits there with --trust. A pull refuses
// a blob the registry changed and a tag moved to another checkpoint's
// manifest, naming each, and leaves nothing behind; a push refuses a
// checkpoint whose blob was changed on disk before it sends anything.
func TestPushPull(t *testing.T) {
	long(t)
	reg := startRegistry(t)
	key, pub := genKey(t, "key")
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1", "--sign", key)
	if code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	ref := reg.host + "/tilepipe/checkpoint"
	code, out, errs = tp(t, "push", dir, ref)
	if code != exitOK {
		t.Fatalf("push = exit %d:\n%s%s", code, out, errs)
	}
	stages, err := transfer.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, st := range stages {
		fmt.Fprintf(&want, "%s:%s %s\n", ref, artifacts.StageName(st.Manifest.ArtifactType), st.Descriptor.Digest)
	}
	if out != want.String() {
		t.Errorf("push printed\n%s\nwant\n%s", out, want.String())
	}

	// The chain in the registry, as oras discover reads it.
	repo, err := transfer.Repository(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i+1 < len(stages); i++ {
		d := stages[i].Descriptor
		rs, err := transfer.Referrers(ctx, repo, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size})
		next := stages[i+1].Descriptor
		if err != nil || len(rs) != 1 || rs[0].Digest != next.Digest || rs[0].ArtifactType != next.ArtifactType {
			t.Errorf("referrers of %s = %+v (%v), want the %s manifest %s alone", artifacts.StageName(stages[i].Manifest.ArtifactType), rs, err, artifacts.StageName(next.ArtifactType), next.Digest)
		}
	}

	pulled := filepath.Join(t.TempDir(), "pulled")
	if code, out, errs := tp(t, "pull", ref, pulled); code != exitOK {
		t.Fatalf("pull = exit %d:\n%s%s", code, out, errs)
	}
	again, err := transfer.Open(pulled)
	if err != nil {
		t.Fatal(err)
	}
	for i := range stages {
		if again[i].Descriptor.Digest != stages[i].Descriptor.Digest {
			t.Errorf("pulled %s manifest %s, pushed %s", artifacts.StageName(transfer.Chain[i]), again[i].Descriptor.Digest, stages[i].Descriptor.Digest)
		}
	}
	code, out, errs = tp(t, "audit", "--capture", filepath.Join(pulled, "capture"), "--prepared", filepath.Join(pulled, "prepared"), "--replay", filepath.Join(pulled, "replay"), "--trust", pub.Path)
	if code != exitOK || !strings.Contains(out, "; signed by trusted key "+pub.ID[:16]+")") {
		t.Errorf("audit --trust of the pulled checkpoint = exit %d, want 0 and signed by the trusted key:\n%s%s", code, out, errs)
	}

	// A second checkpoint, whose replay a forger tags as the first one's.
	other, code, out, errs := naiveRun(t, tinyCohort(t, `{"op": "gemm", "dims": {"M": 16, "N": 16, "K": 16}, "seed": 4}`), "1", "--sign", key)
	if code != exitOK {
		t.Fatalf("second run = exit %d:\n%s%s", code, out, errs)
	}
	otherRef := reg.host + "/tilepipe/other"
	if code, out, errs := tp(t, "push", other, otherRef); code != exitOK {
		t.Fatalf("push of the second checkpoint = exit %d:\n%s%s", code, out, errs)
	}
	otherRepo, err := transfer.Repository(otherRef)
	if err != nil {
		t.Fatal(err)
	}
	otherStages, err := transfer.Open(other)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tag moved to another checkpoint's replay", func(t *testing.T) {
		moved := reg.host + "/tilepipe/moved"
		if code, out, errs := tp(t, "push", dir, moved); code != exitOK {
			t.Fatalf("push = exit %d:\n%s%s", code, out, errs)
		}
		movedRepo, err := transfer.Repository(moved)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := oras.Copy(ctx, otherRepo, "replay", movedRepo, "replay", oras.DefaultCopyOptions); err != nil {
			t.Fatal(err)
		}
		into := filepath.Join(t.TempDir(), "pulled")
		code, _, errs := tp(t, "pull", moved, into)
		want := fmt.Sprintf("replay manifest subject %s, want the prepared manifest %s", otherStages[1].Descriptor.Digest, stages[1].Descriptor.Digest)
		if code != exitFailure || !strings.Contains(errs, want) {
			t.Errorf("pull = exit %d, %q; want 1 and %q", code, errs, want)
		}
		assertNothingLeft(t, into)
	})
	t.Run("blob changed in the registry", func(t *testing.T) {
		l, err := stages[0].Layer("cohort.json")
		if err != nil {
			t.Fatal(err)
		}
		p := reg.blob(l.Digest)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		forged := []byte(strings.Replace(string(b), `"seed": 3`, `"seed": 9`, 1))
		if string(forged) == string(b) || len(forged) != len(b) {
			t.Fatalf("the forged cohort.json is not a same-length change of %q", b)
		}
		if err := os.WriteFile(p, forged, 0o644); err != nil {
			t.Fatal(err)
		}
		into := filepath.Join(t.TempDir(), "pulled")
		code, _, errs := tp(t, "pull", ref, into)
		want := fmt.Sprintf("pull %s:capture blob cohort.json (%s): the registry sent bytes of digest sha256:", ref, artifacts.Short(l.Digest))
		if code != exitFailure || !strings.Contains(errs, want) || !strings.Contains(errs, ", the manifest names "+string(l.Digest)+": digest mismatch") {
			t.Errorf("pull = exit %d, %q; want 1 and %q", code, errs, want)
		}
		assertNothingLeft(t, into)
	})
	t.Run("push refuses a checkpoint without its audit stage", func(t *testing.T) {
		partial := copyRun(t, dir)
		if err := os.RemoveAll(filepath.Join(partial, "audit")); err != nil {
			t.Fatal(err)
		}
		code, _, errs := tp(t, "push", partial, reg.host+"/tilepipe/partial")
		if want := "checkpoint " + partial + " has no audit stage: tilepipe audit --capture " + partial + "/capture"; code != exitFailure || !strings.Contains(errs, want) {
			t.Errorf("push without an audit stage = exit %d, %q; want 1 and %q", code, errs, want)
		}
	})
	t.Run("push refuses a checkpoint changed on disk", func(t *testing.T) {
		forged := copyRun(t, dir)
		flipByte(t, layerPath(t, filepath.Join(forged, "replay"), artifacts.ReplayType, "results.md"))
		code, _, errs := tp(t, "push", forged, reg.host+"/tilepipe/forged")
		if code != exitFailure || !strings.Contains(errs, "results.md") || !strings.Contains(errs, "digest mismatch") {
			t.Errorf("push of a tampered checkpoint = exit %d, %q; want 1 naming results.md's digest mismatch", code, errs)
		}
		if _, err := transfer.Repository(reg.host + "/tilepipe/forged"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.Get("http://" + reg.host + "/v2/tilepipe/forged/tags/list"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("tags of the refused repository: %v %v, want 404 (nothing pushed)", resp.Status, err)
		}
	})
}

// assertNothingLeft checks a failed pull left neither its output nor its
// temporary directory.
func assertNothingLeft(t *testing.T, output string) {
	t.Helper()
	if _, err := os.Lstat(output); !os.IsNotExist(err) {
		t.Errorf("a failed pull left %s (%v)", output, err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(output), ".*pull-*")); len(m) > 0 {
		t.Errorf("a failed pull left %v", m)
	}
}
