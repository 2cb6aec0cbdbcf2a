package audit

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/oracle"
)

// maxCubin bounds a cubin or PTX read back.
const maxCubin = 1 << 30

// cubinChainCheck checks that every prepared cubin entry's cubin is its PTX's
// (docs/gpu.md, "The cubin chain").
func cubinChainCheck(cp *checkpoint, f *facts) finding {
	readPrep := func(d artifacts.Digest, limit int64) ([]byte, error) {
		if !cp.prep.Has(d) {
			return nil, fmt.Errorf("blob %s is not a layer of the prepared stage", artifacts.Short(d))
		}
		return cp.prep.Store.ReadVerified(d, "prepared output", limit)
	}
	p, w, n := cubinChains(cp.cdoc, cp.pdoc, cp.readCapture, readPrep, rebuildHere)
	if n == 0 && len(p)+len(w) == 0 {
		return finding{skip: true} // no cubin entry: nothing to say
	}
	return finding{problems: p, warnings: w, summary: fmt.Sprintf("%d cubin entries: the cubin each timer loads holds the code ptxas builds from the PTX stored beside it, and its launch file is the manifest's launches, checked against the case and the PTX", n)}
}

// rebuild builds ptx with the ptxas at path (args as recorded) and returns
// the cubin; an error when it cannot.
type rebuild func(path string, args []string, ptx []byte) ([]byte, error)

// rebuildHere runs ptxas here, with a minute's limit, in a directory of
// its own.
func rebuildHere(path string, args []string, ptx []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "tilepipe-audit-ptxas-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, out := filepath.Join(dir, "kernel.ptx"), filepath.Join(dir, "kernel.cubin")
	if err := os.WriteFile(src, ptx, 0o444); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(slices.Clone(args), src, "-o", out)...)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", path, err, strings.TrimSpace(string(msg)))
	}
	return os.ReadFile(out)
}

// cubinChains is the cubin chain check over a capture and a prepared
// document, reading capture and prepared blobs with readCap and readPrep:
// for every prepared cubin entry, its chain names the PTX and cubin its
// capture build stored (the cubin the entry's timer loads), ptxas flags
// that are the launch manifest's with --gpu-name the PTX's .target, and a
// rebuilt cubin, a layer of the prepared stage, with the same code as the
// stored one (launch.SameCode). Where a ptxas with the recorded digest is
// found here (launch.FindPtxas), the PTX is built again with it (again)
// and compared; otherwise a warning says the rebuild is prepare's word.
// An entry prepared before the chain is a warning. Returns the problems,
// the warnings and the cubin entries checked.
func cubinChains(cdoc artifacts.CaptureDoc, pdoc artifacts.PreparedDoc, readCap, readPrep func(artifacts.Digest, int64) ([]byte, error), again rebuild) (p, w []string, n int) {
	builds := map[artifacts.Pair]artifacts.Build{}
	sigs := map[string][]oracle.Param{}
	for _, c := range cdoc.Cases {
		sigs[c.Case.ID] = c.Signature
		for _, b := range c.Builds {
			builds[artifacts.Pair{Case: c.Case.ID, Route: b.Route}] = b
		}
	}
	var here ptxasHere
	var herr error
	if here.path, herr = launch.FindPtxas(); herr == nil {
		if here.digest, _, herr = artifacts.HashFile(here.path); herr != nil {
			here.path = ""
		}
	}
	notHere := map[string]bool{}
	for _, e := range pdoc.Entries {
		if e.Kind != artifacts.KindCubin || e.Status != artifacts.StatusPrepared {
			continue
		}
		n++
		name := e.Case + "/" + e.Route
		if e.Chain == nil {
			w = append(w, fmt.Sprintf("entry %s: prepared before the cubin chain: its cubin is not tied to its PTX", name))
			continue
		}
		problem, elsewhere := chainOf(e, builds[e.Pair()], sigs[e.Case], readCap, readPrep, again, here)
		if problem != "" {
			p = append(p, fmt.Sprintf("entry %s: chain: %s", name, problem))
		}
		if elsewhere != "" {
			notHere[elsewhere] = true
		}
	}
	if len(notHere) > 0 {
		why := fmt.Sprintf("the ptxas here, %s, is %s", here.path, artifacts.Short(here.digest))
		if herr != nil {
			why = herr.Error()
		}
		w = append(w, fmt.Sprintf("the PTX was not built again here with the ptxas prepare used, %s: %s; the rebuilt cubins are prepare's", strings.Join(slices.Sorted(maps.Keys(notHere)), ", "), why))
	}
	return p, w, n
}

// ptxasHere is the ptxas this machine has, and its digest ("" for none).
type ptxasHere struct {
	path   string
	digest artifacts.Digest
}

// chainOf checks one prepared cubin entry's chain against its capture
// build b: the PTX, the cubin the timer loads, ptxas and its arguments
// (the manifest's and the PTX's .target), the cubin's code against
// prepare's rebuild, and against one made here where this machine has
// the same ptxas; and the launch list: the manifest checked against the
// case's signature sig and the PTX's entries, and the timer's launch file
// its line form (a pipeline's launches, in order). It returns the problem
// ("" for none), and the ptxas prepare used when it is not here.
func chainOf(e artifacts.Prepared, b artifacts.Build, sig []oracle.Param, readCap, readPrep func(artifacts.Digest, int64) ([]byte, error), again rebuild, here ptxasHere) (problem, notHere string) {
	c := e.Chain
	files := map[string]artifacts.FileRef{}
	for _, f := range b.Files {
		files[f.Role] = f
	}
	ptxRef, cubRef, manRef := files["ptx"], files["cubin"], files["manifest"]
	var loaded artifacts.Digest
	var launchRef artifacts.FileRef
	for _, k := range e.Kernel {
		if k.Role == artifacts.RoleLaunch {
			launchRef = k
		}
		if k.Role == artifacts.RoleCubin {
			loaded = k.Digest
		}
	}
	switch {
	case c.PTX != ptxRef.Digest:
		return fmt.Sprintf("ptx %s, the capture build's %s is %s", artifacts.Short(c.PTX), ptxRef.Path, artifacts.Short(ptxRef.Digest)), ""
	case c.Cubin != cubRef.Digest || c.Cubin != loaded:
		return fmt.Sprintf("cubin %s, the capture build's %s is %s and the timer loads %s", artifacts.Short(c.Cubin), cubRef.Path, artifacts.Short(cubRef.Digest), artifacts.Short(loaded)), ""
	case !filepath.IsAbs(c.Ptxas) || c.PtxasDigest == "":
		return fmt.Sprintf("ptxas %q, digest %q: want an absolute path and its digest", c.Ptxas, c.PtxasDigest), ""
	}
	ptx, err := readCap(c.PTX, maxCubin)
	if err != nil {
		return fmt.Sprintf("ptx: %v", err), ""
	}
	mb, err := readCap(manRef.Digest, launch.MaxManifestBytes)
	if err != nil {
		return fmt.Sprintf("manifest: %v", err), ""
	}
	m, err := launch.Parse(mb)
	if err == nil {
		err = launch.CheckPtxas(m.Ptxas)
	}
	if err != nil {
		return fmt.Sprintf("%s: %v", manRef.Path, err), ""
	}
	if why := launchList(m, sig, ptx, launchRef, readPrep); why != "" {
		return why, ""
	}
	target, err := launch.Target(ptx)
	if err != nil {
		return fmt.Sprintf("%s: %v", ptxRef.Path, err), ""
	}
	if want := append(slices.Clone(m.Ptxas), "--gpu-name="+target); !slices.Equal(c.Args, want) {
		return fmt.Sprintf("ptxas ran with %q, the manifest and the PTX's .target give %q", c.Args, want), ""
	}
	cubin, err := readCap(c.Cubin, maxCubin)
	if err != nil {
		return fmt.Sprintf("cubin: %v", err), ""
	}
	rebuilt, err := readPrep(c.Rebuilt.Digest, maxCubin)
	if err != nil {
		return fmt.Sprintf("rebuilt cubin: %v", err), ""
	}
	if err := launch.SameCode(cubin, rebuilt); err != nil {
		return fmt.Sprintf("%s is not the rebuilt cubin's code: %v", cubRef.Path, err), ""
	}
	if here.path == "" || here.digest != c.PtxasDigest {
		return "", fmt.Sprintf("%s (%s)", c.Ptxas, artifacts.Short(c.PtxasDigest))
	}
	ours, err := again(here.path, c.Args, ptx)
	if err != nil {
		return fmt.Sprintf("ptxas here: %v", err), ""
	}
	if err := launch.SameCode(cubin, ours); err != nil {
		return fmt.Sprintf("%s is not what ptxas builds here from %s: %v", cubRef.Path, ptxRef.Path, err), ""
	}
	return "", ""
}

// launchList checks what the timer launches: the manifest against the
// case (every launch's kernel, shape and parameters; a pipeline's
// buffers) and the PTX's entries, and the prepared launch file (ref) is
// the manifest's line form byte for byte, so the launches the timer
// reads, in their order, are the ones the capture checked.
func launchList(m launch.Manifest, sig []oracle.Param, ptx []byte, ref artifacts.FileRef, readPrep func(artifacts.Digest, int64) ([]byte, error)) string {
	if err := m.Check(sig); err != nil {
		return err.Error()
	}
	if err := m.MatchPTX(ptx); err != nil {
		return err.Error()
	}
	got, err := readPrep(ref.Digest, launch.MaxManifestBytes)
	if err != nil {
		return fmt.Sprintf("launch file %s: %v", ref.Path, err)
	}
	if want := m.Lines(sig); string(got) != want {
		return fmt.Sprintf("launch file %s (%s) is not the manifest's launches (%d launches, %s): the timer would run another list", ref.Path, artifacts.Short(ref.Digest), len(m.List()), artifacts.Short(digest.FromString(want)))
	}
	return ""
}
