package audit

import (
	"fmt"
	"path"
	"slices"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
)

// kernelsAgree checks every route built from a user's kernel file
// (--kernel NAME=KIND:FILE, docs/kernels.md): the route is kernel-KIND
// under NAME, the file is the layer external/kernels/NAME/BASE, and every
// build of it lists that file, byte for byte, as its source BASE. So the
// checkpoint's claim for NAME is a claim for the file it names. A route
// that runs a kernel kind without a file is refused too.
func kernelsAgree(cdoc artifacts.CaptureDoc, layers map[string]ocispec.Descriptor) []string {
	var p []string
	for _, r := range cdoc.Routes {
		k := r.Kernel
		if k == nil {
			if strings.HasPrefix(r.DescribedName(), "kernel-") {
				p = append(p, fmt.Sprintf("route %s: runs %s, which builds a user's kernel file, and records no kernel", r.Name, r.DescribedName()))
			}
			continue
		}
		base := path.Base(k.Title)
		switch want := "external/kernels/" + r.Name + "/" + base; {
		case r.DescribedName() != "kernel-"+k.Kind:
			p = append(p, fmt.Sprintf("route %s: kernel of kind %q, but the route is %s, not kernel-%s", r.Name, k.Kind, r.DescribedName(), k.Kind))
		case k.Title != want:
			p = append(p, fmt.Sprintf("route %s: kernel title %q, want %q", r.Name, k.Title, want))
		case layers[k.Title].Digest != k.Digest:
			p = append(p, fmt.Sprintf("route %s: kernel %s is %s, the layer %s is %q", r.Name, k.Title, k.Digest, k.Title, layers[k.Title].Digest))
		default:
			p = append(p, kernelSources(cdoc, r.Name, base, k.Digest)...)
		}
	}
	return p
}

// kernelSources: every built row of route name is of the kernel file
// (kernelBuild).
func kernelSources(cdoc artifacts.CaptureDoc, name, base string, d artifacts.Digest) []string {
	var p []string
	for _, c := range cdoc.Cases {
		i := slices.IndexFunc(c.Builds, func(b artifacts.Build) bool { return b.Route == name })
		if i < 0 || c.Builds[i].Status != artifacts.StatusBuilt {
			continue
		}
		if why := kernelBuild(c.Builds[i], base, d, name); why != "" {
			p = append(p, fmt.Sprintf("build %s/%s: %s", c.Case.ID, name, why))
		}
	}
	return p
}

// kernelBuild says why build b is not of the kernel file (base, digest d)
// ("" where it is): its one source is the file; and a process build (the
// torch kind), which imports the file at every visit, has it as its one
// cache file cache/BASE and names it last in its arguments (--user-kernel
// BASE): the code a visit runs is the file the row names.
func kernelBuild(b artifacts.Build, base string, d artifacts.Digest, name string) string {
	want := []struct{ role, path string }{{artifacts.RoleSource, base}}
	if b.Process != nil {
		want = append(want, struct{ role, path string }{artifacts.RoleCache, "cache/" + base})
	}
	for _, w := range want {
		var fs []artifacts.FileRef
		for _, f := range b.Files {
			if f.Role == w.role {
				fs = append(fs, f)
			}
		}
		switch {
		case len(fs) != 1 || fs[0].Path != w.path:
			return fmt.Sprintf("%s files %s, want the kernel file alone as %s", w.role, fileList(fs), w.path)
		case fs[0].Digest != d:
			return fmt.Sprintf("%s %s is %s, the kernel file (external/kernels/%s/%s) is %s", w.role, w.path, fs[0].Digest, name, base, d)
		}
	}
	if a := b.Process; a != nil && (len(a.Args) < 2 || !slices.Equal(a.Args[len(a.Args)-2:], []string{"--user-kernel", base})) {
		return fmt.Sprintf("process args %q, want them to end --user-kernel %s", a.Args, base)
	}
	return ""
}
