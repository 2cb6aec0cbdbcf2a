package artifacts

import (
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
)

// Digest is the sha256 content address of a blob. It wraps go-digest's
// Digest so the algorithm is always sha256 and messages can use Short.
type Digest = digest.Digest

// ParseDigest parses "sha256:<64 hex>", refusing other algorithms.
func ParseDigest(s string) (Digest, error) {
	d, err := digest.Parse(s)
	if err != nil {
		return "", fmt.Errorf("parse digest %q: %w", s, err)
	}
	if d.Algorithm() != digest.SHA256 {
		return "", fmt.Errorf("parse digest %q: algorithm %s, want sha256", s, d.Algorithm())
	}
	return d, nil
}

// Short is the first 12 hex digits of d, for messages. A malformed d (as
// read from a forged document) is returned whole rather than panicking.
func Short(d Digest) string {
	_, h, ok := strings.Cut(string(d), ":")
	if ok && len(h) > 12 {
		return h[:12]
	}
	return string(d)
}

// ErrDigestMismatch is returned when a blob's bytes do not hash to the
// digest it is stored under or referenced by.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrNotFound is returned when a referenced blob is not in the store.
var ErrNotFound = errors.New("blob not found")

// MismatchError names the blob, the digest expected and the digest its
// bytes have. It matches [ErrDigestMismatch] with errors.Is.
type MismatchError struct {
	Name     string
	Path     string
	Expected Digest
	Actual   Digest
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("blob %s (%s): digest mismatch: expected %s, actual %s", e.Name, e.Path, e.Expected, e.Actual)
}

func (e *MismatchError) Is(target error) bool { return target == ErrDigestMismatch }
