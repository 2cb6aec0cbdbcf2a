// Package transfer moves a whole checkpoint (its capture, prepared,
// replay and audit stages) to and from an OCI registry, through oras-go.
//
// # In the registry
//
// A checkpoint is one repository. Each stage is a manifest there, tagged
// by its name (capture, prepared, replay, audit), byte for byte the
// manifest of its stage directory, so its digest is the one the receipts
// and the audit name; each stage's subject is the one before it, which
// the registry (or oras-go's referrers tag schema, where the registry has
// no referrers API) lists as a referrer: oras discover shows capture ←
// prepared ← replay ← audit.
//
// # Verification
//
// [Push] opens every stage (every blob re-hashed) and checks the chain
// before it sends anything. [Pull] fetches every stage into a directory
// of its own beside the new one, checking every blob's bytes against the
// digest its manifest names as it is written, then opens every stage and
// checks the chain again, and only then renames that directory to the
// new one: a pull that fails leaves nothing behind.
//
// # Credentials
//
// Credentials come from the usual Docker configuration ($DOCKER_CONFIG,
// else ~/.docker/config.json, with its credential helpers), read by
// oras-go's credential store, never from flags. A registry on a loopback
// address is spoken to over plain HTTP, as Docker does; any other over
// HTTPS.
package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/progress"
)

// Chain is the artifact types of a checkpoint's stages, in chain order.
var Chain = []string{artifacts.CaptureType, artifacts.PreparedType, artifacts.ReplayType, artifacts.AuditType}

// maxManifestBytes bounds a manifest fetched from a registry.
const maxManifestBytes = 64 << 20

// Open opens every stage of the checkpoint in dir (dir/capture,
// dir/prepared, dir/replay, dir/audit), re-hashing every blob, and checks
// that each stage's subject is the manifest of the stage before it.
func Open(dir string) ([]*artifacts.Stage, error) {
	var stages []*artifacts.Stage
	for i, typ := range Chain {
		name := artifacts.StageName(typ)
		if _, err := os.Lstat(filepath.Join(dir, name)); typ == artifacts.AuditType && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint %s has no audit stage: tilepipe audit --capture %[1]s/capture --prepared %[1]s/prepared --replay %[1]s/replay --stage %[1]s/audit writes one", dir)
		}
		st, err := artifacts.OpenStage(filepath.Join(dir, name), typ, nil)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		if i > 0 {
			prev := stages[i-1].Descriptor
			if s := st.Manifest.Subject; s == nil || s.Digest != prev.Digest || s.Size != prev.Size || s.MediaType != prev.MediaType {
				got := "none"
				if s != nil {
					got = string(s.Digest)
				}
				return nil, fmt.Errorf("checkpoint %s: %s manifest subject %s, want the %s manifest %s", dir, name, got, artifacts.StageName(Chain[i-1]), prev.Digest)
			}
		}
		stages = append(stages, st)
	}
	return stages, nil
}

// Repository is the repository ref names (host/name, no tag or digest),
// with credentials from the Docker configuration.
func Repository(ref string) (*remote.Repository, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w", ref, err)
	}
	if r.Reference != "" {
		return nil, fmt.Errorf("reference %q: want a repository (host/name) without a tag or digest: a checkpoint's stages are tagged capture, prepared, replay and audit", ref)
	}
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w", ref, err)
	}
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker credentials: %w", err)
	}
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(store)}
	repo.PlainHTTP = loopback(r.Registry)
	return repo, nil
}

// loopback reports whether a registry host[:port] is this machine.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Push sends the checkpoint in dir to the repository ref, each stage
// tagged by its name, in chain order (so each subject is there before its
// referrer), after Open has verified it. It returns the stages' manifest
// descriptors.
func Push(ctx context.Context, dir, ref string, p *progress.Reporter) ([]ocispec.Descriptor, error) {
	stages, err := Open(dir)
	if err != nil {
		return nil, err
	}
	repo, err := Repository(ref)
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for i, st := range stages {
		name := artifacts.StageName(Chain[i])
		src, err := oci.NewFromFS(ctx, os.DirFS(st.Store.Dir()))
		if err != nil {
			return nil, fmt.Errorf("push %s: %w", name, err)
		}
		desc := ocispec.Descriptor{MediaType: st.Descriptor.MediaType, Digest: st.Descriptor.Digest, Size: st.Descriptor.Size, ArtifactType: st.Descriptor.ArtifactType}
		if err := oras.CopyGraph(ctx, src, repo, desc, oras.DefaultCopyGraphOptions); err != nil {
			return nil, fmt.Errorf("push %s to %s: %w", name, ref, err)
		}
		if err := repo.Tag(ctx, desc, name); err != nil {
			return nil, fmt.Errorf("push %s: tag %s: %w", ref, name, err)
		}
		p.Printf("push: %s %s:%s %s", st.Store.Dir(), ref, name, desc.Digest)
		out = append(out, desc)
	}
	return out, nil
}

// Pull fetches the checkpoint in repository ref into output, which must
// not exist: every stage by its tag, every blob checked against its digest
// as it is written, then the stages opened and the chain checked, then
// the whole renamed into place. It returns the stages' manifest
// descriptors.
func Pull(ctx context.Context, ref, output string, p *progress.Reporter) ([]ocispec.Descriptor, error) {
	if _, err := os.Lstat(output); !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pull: output %s already exists; choose a new directory", output)
	}
	repo, err := Repository(ref)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(output), "."+filepath.Base(output)+".pull-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // gone once renamed; what a failed pull fetched, otherwise
	var out []ocispec.Descriptor
	for _, typ := range Chain {
		d, err := pullStage(ctx, repo, ref, typ, filepath.Join(tmp, artifacts.StageName(typ)))
		if err != nil {
			return nil, err
		}
		p.Printf("pull: %s:%s %s", ref, artifacts.StageName(typ), d.Digest)
		out = append(out, d)
	}
	if _, err := Open(tmp); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 otherwise
		return nil, err
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, output, unix.RENAME_NOREPLACE); err != nil {
		return nil, fmt.Errorf("pull: move the verified checkpoint to %s: %w", output, err)
	}
	return out, nil
}

// pullStage fetches the stage tagged by typ's name into a new store at
// dir: its manifest (of artifact type typ), its config and every layer,
// each written under the digest its bytes have and refused when that is
// not the digest the manifest names.
func pullStage(ctx context.Context, repo *remote.Repository, ref, typ, dir string) (_ ocispec.Descriptor, err error) {
	name := artifacts.StageName(typ)
	desc, err := repo.Resolve(ctx, name)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s: %w", ref, name, err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest || desc.Size > maxManifestBytes {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s: a %s of %d bytes, want an image manifest (%s) of at most %d", ref, name, desc.MediaType, desc.Size, ocispec.MediaTypeImageManifest, maxManifestBytes)
	}
	mb, err := content.FetchAll(ctx, repo, desc) // checked against desc's digest
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s manifest: %w", ref, name, err)
	}
	m, err := artifacts.ParseManifest(mb)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s manifest %s: %w", ref, name, artifacts.Short(desc.Digest), err)
	}
	if m.ArtifactType != typ {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s: manifest artifactType %q, want %s", ref, name, m.ArtifactType, typ)
	}
	s, err := artifacts.Begin(dir, "pull", nil)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer s.Abort(&err)
	done := map[digest.Digest]bool{}
	for _, b := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if done[b.Digest] {
			continue
		}
		title := b.Annotations[artifacts.AnnotationTitle]
		if title == "" {
			title = "config"
		}
		if err := pullBlob(ctx, repo, s, b); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s blob %s (%s): %w", ref, name, title, artifacts.Short(b.Digest), err)
		}
		done[b.Digest] = true
	}
	d, err := s.CommitManifest(mb, typ)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if d.Digest != desc.Digest {
		return ocispec.Descriptor{}, fmt.Errorf("pull %s:%s: stored manifest %s, the registry named %s", ref, name, d.Digest, desc.Digest)
	}
	return d, nil
}

// pullBlob streams blob b from the repository into the store, refusing
// bytes of another length or digest.
func pullBlob(ctx context.Context, repo *remote.Repository, s *artifacts.Store, b ocispec.Descriptor) error {
	if err := b.Digest.Validate(); err != nil || b.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("digest %q: want sha256:<64 hex>", b.Digest)
	}
	rc, err := repo.Blobs().Fetch(ctx, b)
	if err != nil {
		return err
	}
	defer rc.Close()
	// Stored under the digest of the bytes that came; a checkpoint with
	// another blob is removed whole (Pull's temporary directory).
	got, err := s.Put(io.LimitReader(rc, b.Size+1), b.MediaType)
	switch {
	case err != nil:
		return err
	case got.Size != b.Size:
		return fmt.Errorf("the registry sent %d bytes, the manifest says %d", got.Size, b.Size)
	case got.Digest != b.Digest:
		return fmt.Errorf("the registry sent bytes of digest %s, the manifest names %s: %w", got.Digest, b.Digest, artifacts.ErrDigestMismatch)
	}
	return nil
}

// Referrers lists the manifests whose subject is desc in the repository
// (the referrers API, or the referrers tag schema where the registry has
// none), as oras discover does.
func Referrers(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var out []ocispec.Descriptor
	err := repo.Referrers(ctx, desc, "", func(rs []ocispec.Descriptor) error {
		out = append(out, rs...)
		return nil
	})
	return out, err
}
