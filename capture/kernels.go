package capture

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/protocol"
)

// KernelKinds are the kinds of kernel file --kernel NAME=KIND:FILE takes,
// each built by the built-in route kernel-KIND (docs/kernels.md).
var KernelKinds = []string{"c", "torch"}

// kernelSuffix is the ending a kind's file name must have: the route
// compiles or imports it by that name, beside files of its own
// (tilepipe_case.h, wrapper.py), which the name can then never be.
var kernelSuffix = map[string]string{"c": ".c", "torch": ".py"}

// KernelEnv names the variable that gives a kernel route its file: capture's
// stored copy, read-only (in describe and in every build's sandbox).
const KernelEnv = "TILEPIPE_KERNEL"

// kernelPrefix begins the name of every kernel route (kernel-c); such a
// route runs only through --kernel, never by --routes.
const kernelPrefix = "kernel-"

// kernelSpec is one --kernel: its kind and the user's file (absolute,
// symlinks resolved), and once stored, the record and capture's copy.
type kernelSpec struct {
	kind, src string
	file      *artifacts.KernelFile
	copy      string
}

// kernelTitle is where a kernel file is stored: external/kernels/NAME/BASE.
func kernelTitle(name, src string) string {
	return "external/kernels/" + name + "/" + filepath.Base(src)
}

// parseKernel cuts --kernel NAME=KIND:FILE; FILE need not exist yet.
func parseKernel(s string) (name, kind, file string, err error) {
	name, rest, ok := strings.Cut(s, "=")
	kind, file, ok2 := strings.Cut(rest, ":")
	switch {
	case !ok || !ok2 || file == "":
		return "", "", "", fmt.Errorf("--kernel %q: want NAME=KIND:FILE, e.g. mine=c:kernels/add.c (docs/kernels.md)", s)
	case !protocol.ValidName(name):
		return "", "", "", fmt.Errorf("--kernel %q: NAME %q: want letters, digits, '.', '_' and '-' (at most 128)", s, name)
	case !slices.Contains(KernelKinds, kind):
		return "", "", "", fmt.Errorf("--kernel %q: kind %q: want one of %s (docs/kernels.md)", s, kind, strings.Join(KernelKinds, ", "))
	}
	return name, kind, file, nil
}

// kernelRoutes resolves every --kernel to the kernel route that builds it,
// under the kernel's name, its file checked to be a regular file.
func kernelRoutes(dir string, kernels []string) ([]routeExec, error) {
	var out []routeExec
	for _, k := range kernels {
		name, kind, file, err := parseKernel(k)
		if err != nil {
			return nil, err
		}
		real, err := regularFile(file)
		if err != nil {
			return nil, fmt.Errorf("--kernel %s: %w", name, err)
		}
		base := filepath.Base(real)
		if suf := kernelSuffix[kind]; !protocol.ValidName(base) || !strings.HasSuffix(base, suf) || base == suf || base == "wrapper.py" {
			return nil, fmt.Errorf("--kernel %s: file name %q: want letters, digits, '.', '_' or '-' ending in %s (and not wrapper.py), the name the route builds it by", name, base, suf)
		}
		route := kernelPrefix + kind
		out = append(out, routeExec{name: route, alias: name, path: filepath.Join(dir, route, "route"), kernel: &kernelSpec{kind: kind, src: real}})
	}
	return out, nil
}

// DescribeKernel describes the route of --kernel NAME=KIND:FILE as
// capture would (tilepipe routes --kernel): its name, and the answer of
// the route kernel-KIND given FILE.
func DescribeKernel(ctx context.Context, dir, kernel string) (string, protocol.Description, error) {
	rs, err := kernelRoutes(dir, []string{kernel})
	if err != nil {
		return "", protocol.Description{}, err
	}
	d, err := describeTemp(ctx, rs[0].path, map[string]string{KernelEnv: rs[0].kernel.src})
	return rs[0].alias, d, err
}

// putKernels stores every kernel file (external/kernels/NAME/BASE) and
// copies the stored bytes into dir, read-only: the route builds what the
// capture recorded, even if the user's file changes meanwhile.
func putKernels(s *artifacts.Store, routes []routeExec, dir string) error {
	for _, r := range routes {
		k := r.kernel
		if k == nil {
			continue
		}
		title := kernelTitle(r.alias, k.src)
		d, err := s.PutFile(k.src, artifacts.MediaOctet)
		if err != nil {
			return fmt.Errorf("--kernel %s: %w", r.alias, err)
		}
		s.Name(title, d)
		k.copy = filepath.Join(dir, filepath.FromSlash(title))
		if err := copyBlob(s, d.Digest, k.copy); err != nil {
			return fmt.Errorf("--kernel %s: %w", r.alias, err)
		}
		k.file = &artifacts.KernelFile{Kind: k.kind, ExternalFile: artifacts.ExternalFile{Title: title, Source: k.src, Digest: d.Digest, Size: d.Size}}
	}
	return nil
}

// kernelCopy is where route r's kernel file lies in capture's scratch
// directory tmp ("" for a route without one).
func kernelCopy(r artifacts.Route, tmp string) string {
	if r.Kernel == nil {
		return ""
	}
	return filepath.Join(tmp, filepath.FromSlash(r.Kernel.Title))
}
