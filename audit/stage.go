package audit

import (
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/sign"
)

// StageTitle is the audit stage's one layer.
const StageTitle = "audit.md"

// WriteStage writes the audit as a stage of its own in dir, which must not
// exist: an OCI layout whose manifest (artifactType artifacts.AuditType)
// has the audit statement as its config, signed with key unless key is
// nil, audit.md as its layer, and the audited replay manifest as its
// subject, so a checkpoint's chain reads capture ← prepared ← replay ←
// audit in a registry as on disk. It returns the manifest descriptor.
func WriteStage(dir string, r *Report, key *sign.Key) (_ ocispec.Descriptor, err error) {
	if r.replay.Digest == "" {
		return ocispec.Descriptor{}, fmt.Errorf("audit stage %s: the audit opened no replay stage to be the subject of", dir)
	}
	s, err := artifacts.Begin(dir, "audit", nil)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer s.Abort(&err)
	md, err := s.PutBytes([]byte(Markdown(r)), artifacts.MediaMarkdown)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	cfg, err := s.PutStatement(statement(r), key)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	subject := r.replay
	return s.Commit(artifacts.AuditType, cfg, []ocispec.Descriptor{artifacts.Layer(StageTitle, md)}, &subject)
}
