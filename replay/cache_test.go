package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// TestCacheChanged: a visit's copy of its cache files passes untouched,
// and each way a visit can change it (a file added, removed, changed,
// replaced by a link, the directory removed) is the visit's failure with
// the first path named.
func TestCacheChanged(t *testing.T) {
	files := map[string]string{"inductor/a.py": "graph", "triton/k/k.cubin": "cubin"}
	mk := func(t *testing.T) (string, []artifacts.FileRef) {
		dir := filepath.Join(t.TempDir(), "cache")
		var refs []artifacts.FileRef
		for rel, body := range files {
			p := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			d, _, err := artifacts.HashFile(p)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, artifacts.FileRef{Path: "cache/" + rel, Role: artifacts.RoleCache, Digest: d, Size: int64(len(body))})
		}
		return dir, refs
	}
	for _, tc := range []struct {
		name   string
		change func(dir string) error
		want   string
	}{
		{"untouched", func(string) error { return nil }, ""},
		{"a kernel added", func(d string) error { return os.WriteFile(filepath.Join(d, "triton/k/new.cubin"), nil, 0o644) },
			"cache_changed: cache/triton/k/new.cubin added (1 of the visit's cache files differ from the captured ones)"},
		{"a file removed", func(d string) error { return os.Remove(filepath.Join(d, "inductor/a.py")) },
			"cache_changed: cache/inductor/a.py removed (1 of the visit's cache files differ from the captured ones)"},
		{"a file changed", func(d string) error { return os.WriteFile(filepath.Join(d, "inductor/a.py"), []byte("other"), 0o644) },
			"cache_changed: cache/inductor/a.py changed (d9298a10d1b0, captured eef93e1d1448) (1 of the visit's cache files differ from the captured ones)"},
		{"a file made a link", func(d string) error {
			p := filepath.Join(d, "triton/k/k.cubin")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("/dev/null", p)
		}, "cache_changed: cache/triton/k/k.cubin is no longer a regular file (L---------) (1 of the visit's cache files differ from the captured ones)"},
		{"the directory removed", func(d string) error { return os.RemoveAll(d) },
			"cache_changed: cache/ unreadable (lstat ..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, refs := mk(t)
			if err := tc.change(dir); err != nil {
				t.Fatal(err)
			}
			got := cacheChanged(dir, refs)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); got != tc.want && !(ok && strings.HasPrefix(got, prefix)) {
				t.Errorf("cacheChanged = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCopyCache: a prepared entry's cache files are copied from the
// capture under the visit's cache directory and then pass cacheChanged;
// an entry (a forged prepared stage) whose data climbs out of cache/, or
// names a blob the capture does not hold, is refused before anything is
// copied there.
func TestCopyCache(t *testing.T) {
	capDir, _, _ := artifacts.TestCheckpoint(t)
	st, err := artifacts.OpenStage(capDir, artifacts.CaptureType, nil)
	if err != nil {
		t.Fatal(err)
	}
	layer := st.Layers[artifacts.DocTitle]
	r := &replayer{cfg: Config{Prepared: "prep"}, cap: st}
	for _, tc := range []struct {
		path   string
		digest artifacts.Digest
		want   string
	}{
		{"cache/inductor/a.json", layer.Digest, ""},
		{"cache/../../evil", layer.Digest, `prepared prep: entry add/jit: data "cache/../../evil": want a path under cache/`},
		{"evil", layer.Digest, `prepared prep: entry add/jit: data "evil": want a path under cache/`},
		{"cache/b", artifacts.Digest("sha256:" + strings.Repeat("0", 64)), "prepared prep: entry add/jit: data cache/b: blob 000000000000 is not a verified layer of the capture"},
	} {
		dir := filepath.Join(t.TempDir(), "visit-0.cache")
		data := []artifacts.FileRef{{Path: tc.path, Role: artifacts.RoleCache, Digest: tc.digest, Size: layer.Size}}
		err := r.copyCache(&artifacts.Prepared{Case: "add", Route: "jit", Data: data}, dir)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("copyCache(%s) = %v, want %q", tc.path, err, tc.want)
			continue
		}
		if tc.want != "" {
			if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(tc.path, "cache/"))); err == nil {
				t.Errorf("copyCache(%s) wrote the file", tc.path)
			}
			continue
		}
		if why := cacheChanged(dir, data); why != "" {
			t.Errorf("the copy of %s: %s, want unchanged", tc.path, why)
		}
	}
}
