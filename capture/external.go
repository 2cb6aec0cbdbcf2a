package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tilepipe/tilepipe/artifacts"
)

// externalPaths checks --ir and --abi (both or neither, existing regular
// files, one base name per IR file) and resolves them to absolute paths
// with symlinks resolved. It returns nil IR when neither is given.
func externalPaths(cfg Config) (irs []string, abi string, err error) {
	switch {
	case len(cfg.IR) == 0 && cfg.ABI == "":
		return nil, "", nil
	case len(cfg.IR) == 0:
		return nil, "", errors.New("--abi without --ir: give both or neither")
	case cfg.ABI == "":
		return nil, "", errors.New("--ir without --abi: give both or neither")
	}
	byBase := map[string]string{}
	for _, p := range cfg.IR {
		real, err := regularFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("--ir: %w", err)
		}
		base := filepath.Base(real)
		if other, ok := byBase[base]; ok {
			return nil, "", fmt.Errorf("--ir: %s and %s have the same base name %s (each is stored as external/ir/NAME)", other, real, base)
		}
		byBase[base] = real
		irs = append(irs, real)
	}
	if abi, err = regularFile(cfg.ABI); err != nil {
		return nil, "", fmt.Errorf("--abi: %w", err)
	}
	return irs, abi, nil
}

// regularFile resolves p to an absolute path without symlinks and checks
// that it is a regular file.
func regularFile(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file (mode %s)", real, fi.Mode())
	}
	return real, nil
}

// putExternal stores the IR files and the ABI (external/ir/NAME,
// external/abi.json), checks that the ABI is a JSON object, and copies the
// stored bytes into dir, from where routes read them: a route reads what
// the capture recorded even if the user's files change meanwhile.
func putExternal(s *artifacts.Store, irs []string, abi, dir string) (*artifacts.External, *caseIR, error) {
	ext, cir := &artifacts.External{}, &caseIR{}
	put := func(src, title string) (artifacts.ExternalFile, string, error) {
		d, err := s.PutFile(src, artifacts.MediaOctet)
		if err != nil {
			return artifacts.ExternalFile{}, "", err
		}
		s.Name(title, d)
		dst := filepath.Join(dir, filepath.FromSlash(title))
		if err := copyBlob(s, d.Digest, dst); err != nil {
			return artifacts.ExternalFile{}, "", err
		}
		return artifacts.ExternalFile{Title: title, Source: src, Digest: d.Digest, Size: d.Size}, dst, nil
	}
	for _, p := range irs {
		f, dst, err := put(p, "external/ir/"+filepath.Base(p))
		if err != nil {
			return nil, nil, fmt.Errorf("--ir %s: %w", p, err)
		}
		ext.IR = append(ext.IR, f)
		cir.Files = append(cir.Files, dst)
	}
	f, dst, err := put(abi, "external/abi.json")
	if err != nil {
		return nil, nil, fmt.Errorf("--abi %s: %w", abi, err)
	}
	ext.ABI, cir.ABI = f, dst
	b, err := s.ReadVerified(f.Digest, f.Title, artifacts.MaxDocBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--abi %s: %w", abi, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, nil, fmt.Errorf("--abi %s: want a JSON object (docs/protocol.md, external IR): %v", abi, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, nil, fmt.Errorf("--abi %s: want a JSON object (docs/protocol.md, external IR), got %s", abi, jsonKind(v))
	}
	return ext, cir, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// copyBlob copies blob d to a new read-only file dst and checks the copy's
// digest.
func copyBlob(s *artifacts.Store, d artifacts.Digest, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return s.CopyOut(d, dst, 0o444)
}
