package artifacts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriterReadBack: what Commit renames into place is what was hashed.
// The bytes are hashed while they are written and the file is read back
// once, by CRC-32C, before the rename; a temporary file changed or cut
// short behind the writer's back (the disk, another process) is refused
// naming it, and nothing enters the store.
func TestWriterReadBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(path string) error
		want   string // after "new blob sha256:HEX (PATH): "
	}{
		{"one byte flipped", func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{'J'}, 0)
			return err
		}, "the file holds 11 bytes with CRC-32C 59ba860b, 11 bytes with CRC-32C c99465aa were written and hashed"},
		{"cut short", func(p string) error { return os.Truncate(p, 5) },
			"the file holds 5 bytes with CRC-32C "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Create(filepath.Join(t.TempDir(), "s"))
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.NewWriter(MediaText)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("hello world")); err != nil {
				t.Fatal(err)
			}
			tmp := w.f.Name()
			if err := tc.change(tmp); err != nil {
				t.Fatal(err)
			}
			_, err = w.Commit()
			prefix := fmt.Sprintf("new blob %s (%s): ", Short("sha256:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"), tmp)
			if err == nil || !strings.HasPrefix(err.Error(), prefix+tc.want) {
				t.Errorf("Commit = %v\nwant %s%s", err, prefix, tc.want)
			}
			if _, err := os.Stat(s.Path("sha256:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9")); !os.IsNotExist(err) {
				t.Errorf("the blob entered the store: %v", err)
			}
			if _, err := os.Stat(tmp); !os.IsNotExist(err) {
				t.Errorf("the temporary file stayed: %v", err)
			}
		})
	}
}
