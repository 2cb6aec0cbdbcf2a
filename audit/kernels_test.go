package audit

import (
	"slices"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// TestKernelsAgree feeds the kernel check one honest capture document and
// one edit of it per rule, each naming its exact problem.
func TestKernelsAgree(t *testing.T) {
	const (
		file  = artifacts.Digest("sha256:1111111111111111111111111111111111111111111111111111111111111111")
		other = artifacts.Digest("sha256:2222222222222222222222222222222222222222222222222222222222222222")
		title = "external/kernels/mine/add.c"
	)
	honest := func() (artifacts.CaptureDoc, map[string]ocispec.Descriptor) {
		k := &artifacts.KernelFile{Kind: "c", ExternalFile: artifacts.ExternalFile{Title: title, Digest: file}}
		doc := artifacts.CaptureDoc{
			Routes: []artifacts.Route{{Name: "mine", Describes: "kernel-c", Kernel: k}},
			Cases: []artifacts.CapturedCase{{Case: oracle.Case{ID: "add-4x64"}, Builds: []artifacts.Build{{Route: "mine", Status: artifacts.StatusBuilt,
				Files: []artifacts.FileRef{{Path: "add.o", Role: artifacts.RoleObject}, {Path: "add.c", Role: artifacts.RoleSource, Digest: file}}}}}},
		}
		return doc, map[string]ocispec.Descriptor{title: {Digest: file}}
	}
	// torch makes the build a process build of the torch kind: the file
	// also its one cache file, named last in its arguments.
	torch := func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
		b := &d.Cases[0].Builds[0]
		b.Files = append(b.Files, artifacts.FileRef{Path: "cache/add.c", Role: artifacts.RoleCache, Digest: file})
		b.Process = &artifacts.Process{Args: []string{"--op", "add", "--user-kernel", "add.c"}}
	}
	for _, tc := range []struct {
		name string
		edit func(*artifacts.CaptureDoc, map[string]ocispec.Descriptor)
		want []string
	}{
		{"honest", func(*artifacts.CaptureDoc, map[string]ocispec.Descriptor) {}, nil},
		{"another route", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) { d.Routes[0].Describes = "halide" },
			[]string{`route mine: kernel of kind "c", but the route is halide, not kernel-c`}},
		{"another title", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			d.Routes[0].Kernel.Title = "external/kernels/other/add.c"
		}, []string{`route mine: kernel title "external/kernels/other/add.c", want "external/kernels/mine/add.c"`}},
		{"layer differs", func(_ *artifacts.CaptureDoc, l map[string]ocispec.Descriptor) {
			l[title] = ocispec.Descriptor{Digest: other}
		},
			[]string{`route mine: kernel external/kernels/mine/add.c is ` + string(file) + `, the layer external/kernels/mine/add.c is "` + string(other) + `"`}},
		{"source differs", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			d.Cases[0].Builds[0].Files[1].Digest = other
		},
			[]string{"build add-4x64/mine: source add.c is " + string(other) + ", the kernel file (external/kernels/mine/add.c) is " + string(file)}},
		{"a second source", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			b := &d.Cases[0].Builds[0]
			b.Files = append(b.Files, artifacts.FileRef{Path: "helper.c", Role: artifacts.RoleSource, Digest: other})
		}, []string{"build add-4x64/mine: source files add.c@" + artifacts.Short(file) + ", helper.c@" + artifacts.Short(other) + ", want the kernel file alone as add.c"}},
		{"torch: the imported copy swapped", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			torch(d, nil)
			d.Cases[0].Builds[0].Files[2].Digest = other
		}, []string{"build add-4x64/mine: cache cache/add.c is " + string(other) + ", the kernel file (external/kernels/mine/add.c) is " + string(file)}},
		{"torch: no imported copy", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			torch(d, nil)
			d.Cases[0].Builds[0].Files = d.Cases[0].Builds[0].Files[:2]
		}, []string{"build add-4x64/mine: cache files none, want the kernel file alone as cache/add.c"}},
		{"torch: another file imported", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			torch(d, nil)
			d.Cases[0].Builds[0].Process.Args = []string{"--op", "add", "--user-kernel", "other.py"}
		}, []string{`build add-4x64/mine: process args ["--op" "add" "--user-kernel" "other.py"], want them to end --user-kernel add.c`}},
		{"torch: the build's", torch, nil},
		{"failed builds are not checked", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) {
			d.Cases[0].Builds[0].Status, d.Cases[0].Builds[0].Files = artifacts.StatusFailed, nil
		}, nil},
		{"record dropped", func(d *artifacts.CaptureDoc, _ map[string]ocispec.Descriptor) { d.Routes[0].Kernel = nil },
			[]string{"route mine: runs kernel-c, which builds a user's kernel file, and records no kernel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, layers := honest()
			tc.edit(&doc, layers)
			if got := kernelsAgree(doc, layers); !slices.Equal(got, tc.want) {
				t.Errorf("kernelsAgree = %q, want %q", got, tc.want)
			}
		})
	}
}
