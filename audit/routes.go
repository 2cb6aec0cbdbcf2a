package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/protocol"
)

// maxDescribe bounds a describe answer read back.
const maxDescribe = 1 << 20

// routesCheck checks every route entry of the capture document against the
// describe answer stored beside it.
func routesCheck(cp *checkpoint, f *facts) finding {
	p := routesAgree(cp.cdoc.Routes, cp.cap.Layers, func(d artifacts.Digest) ([]byte, error) { return cp.readCapture(d, maxDescribe) })
	p = append(p, entriesAgree(cp.cdoc, cp.pdoc)...)
	p = append(p, kernelsAgree(cp.cdoc, cp.cap.Layers)...)
	return finding{problems: p, summary: fmt.Sprintf("%d routes' entries against their stored describe answers (routes/NAME/describe.json) and programs; every prepared entry's environment, below-best note and cache files are its build's; every kernel file route's builds are of its stored file", len(cp.cdoc.Routes))}
}

// entriesAgree: what a prepared entry gives its visits is what its
// capture build asked for: the environment (an object build's env, only
// artifacts.ObjectEnv; a process build's process.env), nothing added; the
// below-best note; the cache files (a process build's, role cache); and
// a process entry's process and program (processAgrees).
func entriesAgree(cdoc artifacts.CaptureDoc, pdoc artifacts.PreparedDoc) []string {
	builds := map[artifacts.Pair]artifacts.Build{}
	for _, c := range cdoc.Cases {
		for _, b := range c.Builds {
			builds[artifacts.Pair{Case: c.Case.ID, Route: b.Route}] = b
		}
	}
	var p []string
	for _, e := range pdoc.Entries {
		if e.Status != artifacts.StatusPrepared {
			continue
		}
		b := builds[e.Pair()]
		want := b.Env
		if b.Process != nil {
			want = b.Process.Env
		}
		if !maps.Equal(e.Env, want) {
			p = append(p, fmt.Sprintf("entry %s/%s: env %v, its capture build asked for %v", e.Case, e.Route, e.Env, want))
		}
		for _, n := range []struct {
			field string
			read  func() (string, error)
			got   string
		}{{"belowBest", b.BelowBest, e.BelowBest}, {"ownGraphs", b.OwnGraphs, e.OwnGraphs}} {
			if want, err := n.read(); err != nil {
				p = append(p, fmt.Sprintf("entry %s/%s: capture build %v", e.Case, e.Route, err))
			} else if n.got != want {
				p = append(p, fmt.Sprintf("entry %s/%s: %s %q, its capture build says %q", e.Case, e.Route, n.field, n.got, want))
			}
		}
		if cold, err := b.Cold(); err != nil {
			p = append(p, fmt.Sprintf("entry %s/%s: capture build %v", e.Case, e.Route, err))
		} else if !e.Cold.Same(cold) {
			p = append(p, fmt.Sprintf("entry %s/%s: cold %s, its capture build says %s", e.Case, e.Route, coldString(e.Cold), coldString(cold)))
		}
		if e.Kind == artifacts.KindObject {
			if err := artifacts.CheckObjectEnv(e.Env); err != nil {
				p = append(p, fmt.Sprintf("entry %s/%s: %v", e.Case, e.Route, err))
			}
		}
		if why := processAgrees(e, b); why != "" {
			p = append(p, fmt.Sprintf("entry %s/%s: %s", e.Case, e.Route, why))
		}
		if want := cacheFiles(b); !slices.Equal(e.Data, want) {
			p = append(p, fmt.Sprintf("entry %s/%s: data %s, its capture build's cache files are %s", e.Case, e.Route, fileList(e.Data), fileList(want)))
		}
	}
	return p
}

// processAgrees says why a prepared entry does not run its build's
// process ("" where it does): the process description (interpreter,
// script, args, env, output policy, closure args) is the build's, field
// for field, and a process entry's program is the build's wrapper file.
// Replay runs exactly these: an entry edited to run another script, or
// the build's script with other arguments (another op, a user's kernel
// dropped: --user-kernel), would time something its row does not name.
func processAgrees(e artifacts.Prepared, b artifacts.Build) string {
	got, _ := json.Marshal(e.Process)
	want, _ := json.Marshal(b.Process)
	if !bytes.Equal(got, want) {
		return fmt.Sprintf("process %s, its capture build's is %s", got, want)
	}
	if b.Process == nil {
		return ""
	}
	i := slices.IndexFunc(b.Files, func(f artifacts.FileRef) bool {
		return f.Role == artifacts.RoleWrapper && f.Path == b.Process.Script
	})
	switch {
	case i < 0:
		return fmt.Sprintf("its capture build lists no wrapper file %s", b.Process.Script)
	case e.Program == nil || e.Program.Path != b.Files[i].Path || e.Program.Digest != b.Files[i].Digest:
		return fmt.Sprintf("program %s, its capture build's wrapper is %s", fileList(programOf(e)), fileList(b.Files[i:i+1]))
	}
	return ""
}

// programOf is e's program as a list of none or one.
func programOf(e artifacts.Prepared) []artifacts.FileRef {
	if e.Program == nil {
		return nil
	}
	return []artifacts.FileRef{*e.Program}
}

// coldString is a cold cost as the audit names it.
func coldString(c *artifacts.ColdCost) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("{compile %gs, cached %gs}", c.CompileFirstCallS, c.CachedFirstCallS)
}

// cacheFiles: a build's files of role cache, in its order: a prepared
// process entry's data (replay gives each visit a fresh copy of them).
func cacheFiles(b artifacts.Build) []artifacts.FileRef {
	var out []artifacts.FileRef
	for _, f := range b.Files {
		if f.Role == artifacts.RoleCache {
			out = append(out, f)
		}
	}
	return out
}

func fileList(fs []artifacts.FileRef) string {
	if len(fs) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fs {
		s = append(s, f.Path+"@"+artifacts.Short(f.Digest))
	}
	return strings.Join(s, ", ")
}

// routesAgree checks each route entry against its layers: describe names
// the layer routes/NAME/describe.json, digest the program routes/NAME/route
// (a program stored for an earlier route under its name keeps that title),
// and every field capture copies from the describe answer (name, kind,
// version, available, reason, ops, validates, accepts_ir, devices) is the
// answer's.
// read returns a verified capture layer.
func routesAgree(routes []artifacts.Route, layers map[string]ocispec.Descriptor, read func(artifacts.Digest) ([]byte, error)) []string {
	var p []string
	for _, r := range routes {
		title := "routes/" + r.Name + "/describe.json"
		if l, ok := layers[title]; !ok {
			p = append(p, fmt.Sprintf("route %s: no layer %s", r.Name, title))
		} else if l.Digest != r.Describe {
			p = append(p, fmt.Sprintf("route %s: describe %s, the layer %s is %s", r.Name, r.Describe, title, l.Digest))
		}
		prog := "routes/" + r.Name + "/route"
		if l, ok := layers[prog]; ok && l.Digest != r.Digest {
			p = append(p, fmt.Sprintf("route %s: digest %s, the layer %s is %s", r.Name, r.Digest, prog, l.Digest))
		}
		b, err := read(r.Describe)
		if err != nil {
			p = append(p, fmt.Sprintf("route %s: describe: %v", r.Name, err))
			continue
		}
		d, err := protocol.ParseDescription(b)
		if err != nil {
			p = append(p, fmt.Sprintf("route %s: describe.json (%s): %v", r.Name, artifacts.Short(r.Describe), err))
			continue
		}
		for _, f := range []struct {
			name      string
			doc, desc any
		}{{"name", r.DescribedName(), d.Name}, {"kind", r.Kind, d.Kind}, {"version", r.Version, d.Version}, {"available", r.Available, d.Available},
			{"reason", r.Reason, d.Reason}, {"validates", r.Validates, d.Validates}, {"acceptsIR", r.AcceptsIR, d.AcceptsIR}, {"buildCache", r.BuildCache, d.BuildCache}} {
			if f.doc != f.desc {
				p = append(p, fmt.Sprintf("route %s: %s %q, its describe.json (%s) says %q", r.Name, f.name, fmt.Sprint(f.doc), artifacts.Short(r.Describe), fmt.Sprint(f.desc)))
			}
		}
		if !slices.Equal(r.Ops, d.Ops) {
			p = append(p, fmt.Sprintf("route %s: ops %v, its describe.json (%s) says %v", r.Name, r.Ops, artifacts.Short(r.Describe), d.Ops))
		}
		if !slices.Equal(r.Devices, d.Devices) {
			p = append(p, fmt.Sprintf("route %s: devices %v, its describe.json (%s) says %v", r.Name, r.Devices, artifacts.Short(r.Describe), d.Devices))
		}
	}
	return p
}
