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

// kernelSources: every built row of route name lists one source file,
// base, whose digest is the kernel file's.
func kernelSources(cdoc artifacts.CaptureDoc, name, base string, d artifacts.Digest) []string {
	var p []string
	for _, c := range cdoc.Cases {
		i := slices.IndexFunc(c.Builds, func(b artifacts.Build) bool { return b.Route == name })
		if i < 0 || c.Builds[i].Status != artifacts.StatusBuilt {
			continue
		}
		var srcs []artifacts.FileRef
		for _, f := range c.Builds[i].Files {
			if f.Role == artifacts.RoleSource {
				srcs = append(srcs, f)
			}
		}
		switch {
		case len(srcs) != 1 || srcs[0].Path != base:
			p = append(p, fmt.Sprintf("build %s/%s: sources %s, want the kernel file alone as %s", c.Case.ID, name, fileList(srcs), base))
		case srcs[0].Digest != d:
			p = append(p, fmt.Sprintf("build %s/%s: source %s is %s, the kernel file (external/kernels/%s/%s) is %s", c.Case.ID, name, base, srcs[0].Digest, name, base, d))
		}
	}
	return p
}
