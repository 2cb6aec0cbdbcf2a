package artifacts

import (
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
)

// PutTensor streams one tensor as an Arrow IPC file into the store,
// hashing while it writes.
func PutTensor(s *Store, m tensor.Meta, data []byte) (ocispec.Descriptor, error) {
	w, err := s.NewWriter(MediaArrow)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := tensor.Write(w, m, data); err != nil {
		w.Abort()
		return ocispec.Descriptor{}, err
	}
	return w.Commit()
}

// OpenTensor verifies blob d and reads it as a tensor (release it after use).
func (s *Store) OpenTensor(d Digest, name string) (*tensor.Tensor, error) {
	if err := s.Verify(ocispec.Descriptor{Digest: d}, name); err != nil {
		return nil, err
	}
	return tensor.ReadFile(s.Path(d), nil)
}

// PutSamples streams rows as one Arrow sample table into the store.
func PutSamples(s *Store, rows []samples.Row) (ocispec.Descriptor, error) {
	w, err := s.NewWriter(MediaArrow)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := samples.Write(w, rows); err != nil {
		w.Abort()
		return ocispec.Descriptor{}, err
	}
	return w.Commit()
}
