package replay

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
)

// A process entry's cache files (artifacts.Prepared.Data: what a JIT
// compiled at capture, docs/protocol.md "Cache files") are its binary as
// much as its script: each visit gets a fresh, writable copy of exactly
// those files ($TILEPIPE_CACHE), and a visit that added, removed or
// changed one (a recompile, an autotune at replay) fails.

// copyCache copies e's cache files from the capture into dir, a new
// directory ("" when e has none).
func (r *replayer) copyCache(e *artifacts.Prepared, dir string) error {
	if dir == "" {
		return nil
	}
	for _, f := range e.Data {
		rel, ok := cacheRel(f.Path)
		if !ok {
			return fmt.Errorf("prepared %s: entry %s/%s: data %q: want a path under %s/", r.cfg.Prepared, e.Case, e.Route, f.Path, artifacts.CacheDir)
		}
		if !r.cap.Has(f.Digest) {
			return fmt.Errorf("prepared %s: entry %s/%s: data %s: blob %s is not a verified layer of the capture", r.cfg.Prepared, e.Case, e.Route, f.Path, artifacts.Short(f.Digest))
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyFile(r.cap.Store.Path(f.Digest), dst, 0o644); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755) // a cache of directories alone is still there
}

// cacheRel is a cache file's path inside the cache directory.
func cacheRel(path string) (string, bool) {
	rel, ok := strings.CutPrefix(path, artifacts.CacheDir+"/")
	return rel, ok && artifacts.ValidTitle(rel)
}

// cacheChanged is why the visit's copy of its cache (dir) is not the
// entry's cache files any more ("" when it is): the first file, in path
// order, added, removed, changed, no longer a regular file or unreadable
// (the visit's code ran as us, and may have made it so: that is the
// visit's failure, not replay's error).
func cacheChanged(dir string, want []artifacts.FileRef) string {
	byPath := map[string]artifacts.FileRef{}
	for _, f := range want {
		byPath[f.Path] = f
	}
	var problems []string
	seen := map[string]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		path := artifacts.CacheDir + "/" + filepath.ToSlash(rel)
		if rel == "." {
			path = artifacts.CacheDir + "/"
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s unreadable (%v)", path, err))
			return nil
		}
		if d.IsDir() {
			return nil
		}
		f, ok := byPath[path]
		seen[path] = ok
		switch {
		case !ok:
			problems = append(problems, path+" added")
		case !d.Type().IsRegular():
			problems = append(problems, fmt.Sprintf("%s is no longer a regular file (%s)", path, d.Type()))
		default:
			got, _, err := artifacts.HashFile(p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s unreadable (%v)", path, err))
			} else if got != f.Digest {
				problems = append(problems, fmt.Sprintf("%s changed (%s, captured %s)", path, artifacts.Short(got), artifacts.Short(f.Digest)))
			}
		}
		return nil
	})
	for path := range byPath {
		if !seen[path] {
			problems = append(problems, path+" removed")
		}
	}
	if len(problems) == 0 {
		return ""
	}
	slices.Sort(problems)
	return fmt.Sprintf("cache_changed: %s (%d of the visit's cache files differ from the captured ones)", problems[0], len(problems))
}
