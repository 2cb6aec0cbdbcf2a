package artifacts

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

type hashed struct {
	d Digest
	n int64
}

// openRegular opens path for reading, refusing symlinks and anything that is
// not a regular file.
func openRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w", path, ErrNotFound)
		}
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (mode %s): %w", path, fi.Mode(), ErrNotFound)
	}
	return os.Open(path)
}

func hashFile(path string) (hashed, error) {
	f, err := openRegular(path)
	if err != nil {
		return hashed{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return hashed{}, err
	}
	return hashed{digest.NewDigest(digest.SHA256, h), n}, nil
}

// HashFile is the sha256 digest of the regular file at path, streamed.
func HashFile(path string) (Digest, int64, error) {
	h, err := hashFile(path)
	return h.d, h.n, err
}

func readRegular(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than the %d-byte limit", path, limit)
	}
	return b, nil
}

// WriteFileAtomic writes b to path through a temp file in the same
// directory, fsyncs it and renames it into place.
func WriteFileAtomic(path string, b []byte) error { return writeFileAtomic(path, b) }

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// CreateTemp makes 0600 files; these are documents for others to read.
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
