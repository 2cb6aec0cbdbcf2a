package artifacts

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
)

// Prune removes, from a stage being resumed, every blob not in keep and
// every unfinished blob write: what a killed writer stored for work it
// never recorded (a visit in flight, a commit cut short) is no product of
// the stage. It returns how many files it removed.
func (s *Store) Prune(keep map[Digest]bool) (int, error) {
	if s.committed || s.lockFile == nil {
		return 0, nil
	}
	n := 0
	blobs := filepath.Join(s.dir, "blobs")
	tmps, err := os.ReadDir(blobs)
	if err != nil {
		return 0, err
	}
	for _, e := range tmps {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if err := os.Remove(filepath.Join(blobs, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	ents, err := os.ReadDir(filepath.Join(blobs, "sha256"))
	if err != nil {
		return n, err
	}
	for _, e := range ents {
		if keep[digest.NewDigestFromEncoded(digest.SHA256, e.Name())] {
			continue
		}
		if err := os.Remove(filepath.Join(blobs, "sha256", e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
