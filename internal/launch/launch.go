// Package launch is the launch manifest of a `cubin` route (issue 11,
// docs/gpu.md): everything the CUDA timer needs to launch a kernel that a
// route compiled, so that no code of the route runs at replay. A route
// hands it over as JSON beside its cubin; prepare checks it against the
// case ([Manifest.Check]) and hands the timer its line form
// ([Manifest.Lines]).
//
// The parameter list is the kernel's as compiled: the PTX entry's
// parameters, in order, after the compiler's specialisation (Triton drops
// constexprs and may drop integers equal to 1, and appends two scratch
// pointers). Measured on the H200 with Triton 3.6
// (docs/results/2026-12-01-cuda-probe): add(x, y, out, n, BLOCK) has six
// parameters, x y out n and two scratch pointers, which run with 0 when
// their sizes are 0.
package launch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tilepipe/tilepipe/oracle"
)

// Parameter kinds.
const (
	Tensor  = "tensor"  // the device pointer of one signature tensor
	I32     = "i32"     // a 32-bit integer by value
	I64     = "i64"     // a 64-bit integer by value
	F32     = "f32"     // a 32-bit float by value
	Scratch = "scratch" // a scratch pointer the timer allocates (or 0 when its size is 0)
	Buffer  = "buffer"  // a pipeline's scratch buffer, by index, shared by its launches
)

// Limits of a launch on the GPUs tilepipe targets (compute capability
// 9.0): what the driver itself would refuse, refused first with the field
// named.
const (
	MaxThreadsPerBlock = 1024
	MaxGridX           = 1<<31 - 1
	MaxGridYZ          = 65535
	MaxClusterBlocks   = 16
	MaxSharedBytes     = 227 << 10 // dynamic shared memory per block, opted in
	MaxParams          = 64
	MaxScratchBytes    = 1 << 30
	MaxManifestBytes   = 1 << 20
	// A pipeline (Manifest.Launches): at most MaxLaunches launches a
	// call, MaxBuffers scratch buffers of at most MaxBufferBytes in all.
	MaxLaunches    = 16
	MaxBuffers     = 16
	MaxBufferBytes = 1 << 30
)

// Manifest is a cubin's launch.
type Manifest struct {
	Kernel      string    `json:"kernel"` // the entry symbol in the cubin
	Arch        string    `json:"arch"`   // the compute capability it was built for, e.g. sm_90
	Grid        [3]uint32 `json:"grid"`
	Block       [3]uint32 `json:"block"`
	Cluster     [3]uint32 `json:"cluster"`
	SharedBytes uint32    `json:"sharedBytes"` // dynamic shared memory
	Params      []Param   `json:"params"`
	// Scratch sizes and alignments, for the Scratch params in order
	// (Triton: global, then profile).
	Scratch []ScratchSpec `json:"scratch"`
	// Ptxas is the flags ptxas built the cubin with from the PTX, beside
	// --gpu-name (the PTX's .target) and the files: prepare runs ptxas
	// with them again and compares (CheckPtxas, SameCode).
	Ptxas []string `json:"ptxas"`
	// Launches, instead of the one launch above (kernel, grid, block,
	// cluster, sharedBytes, params and scratch left out): a pipeline, its
	// kernels (entries of the one cubin) launched in this order on one
	// stream for every call, all of them inside the call's timing
	// (docs/gpu.md, "Pipelines").
	Launches []Launch `json:"launches,omitempty"`
	// Buffers are a pipeline's scratch buffers, passed by index (kind
	// buffer) to any of its launches: the timer allocates each once per
	// visit and fills it with poison before every validation call, so a
	// call can rely on nothing a call before it left there.
	Buffers []ScratchSpec `json:"buffers,omitempty"`
}

// Launch is one launch of a pipeline.
type Launch struct {
	Kernel      string    `json:"kernel"`
	Grid        [3]uint32 `json:"grid"`
	Block       [3]uint32 `json:"block"`
	Cluster     [3]uint32 `json:"cluster"`
	SharedBytes uint32    `json:"sharedBytes"`
	Params      []Param   `json:"params"`
}

// Pipeline says whether m is a pipeline (Launches) rather than one launch.
func (m Manifest) Pipeline() bool { return len(m.Launches) > 0 }

// List is m's launches in order: the pipeline's, or the one launch.
func (m Manifest) List() []Launch {
	if m.Pipeline() {
		return m.Launches
	}
	return []Launch{{Kernel: m.Kernel, Grid: m.Grid, Block: m.Block, Cluster: m.Cluster, SharedBytes: m.SharedBytes, Params: m.Params}}
}

// Param is one kernel parameter in launch order.
type Param struct {
	Kind   string `json:"kind"`
	Tensor string `json:"tensor,omitempty"` // Tensor: the signature name
	// Value is an integer or float parameter's value, as compiled: a
	// shape or stride is part of what the kernel was specialised for.
	Value json.Number `json:"value,omitempty"`
	// Buffer is a buffer parameter's index in the pipeline's Buffers.
	Buffer *int `json:"buffer,omitempty"`
	// Align is the byte alignment the compiler assumed for a tensor's
	// pointer (Triton's divisibility 16); the timer's buffers must meet it.
	Align int `json:"align,omitempty"`
}

// ScratchSpec is one scratch buffer the kernel expects.
type ScratchSpec struct {
	Bytes int64 `json:"bytes"`
	Align int64 `json:"align"`
}

var symbolRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,255}$`)
var archRE = regexp.MustCompile(`^sm_[0-9]{2,3}a?$`)

// Parse decodes a manifest strictly: unknown fields, trailing data and a
// file over [MaxManifestBytes] are refused.
func Parse(b []byte) (Manifest, error) {
	var m Manifest
	if len(b) > MaxManifestBytes {
		return m, fmt.Errorf("launch manifest: %d bytes, limit %d", len(b), MaxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("launch manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, errors.New("launch manifest: want one JSON object, found more after it")
	}
	return m, nil
}

// Check says whether m launches a kernel of the case with signature sig:
// every field in range, every tensor parameter a signature tensor and
// every signature tensor passed exactly once, every value of its kind.
// A pipeline's launches are checked each as one launch is (a tensor at
// most once in a launch), every signature tensor passed by some launch
// and every buffer by some launch.
func (m Manifest) Check(sig []oracle.Param) error {
	if !archRE.MatchString(m.Arch) {
		return manifestErr("arch: want sm_NN (the compute capability built for), got %q", m.Arch)
	}
	if err := CheckPtxas(m.Ptxas); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, p := range sig {
		names[p.Name] = true
	}
	if m.Pipeline() {
		return m.checkPipeline(sig, names)
	}
	if len(m.Buffers) > 0 {
		return manifestErr("buffers: a pipeline's (launches), not one launch's: use scratch")
	}
	seen := map[string]int{}
	scratch, err := m.List()[0].check("", names, seen, nil)
	if err != nil {
		return err
	}
	for _, p := range sig {
		if _, ok := seen[p.Name]; !ok {
			return manifestErr("tensor %q of the signature is passed by no parameter", p.Name)
		}
	}
	if scratch != len(m.Scratch) {
		return manifestErr("scratch: %d sizes for %d scratch parameters", len(m.Scratch), scratch)
	}
	for i, s := range m.Scratch {
		if err := s.check(fmt.Sprintf("scratch[%d]", i), MaxScratchBytes); err != nil {
			return err
		}
	}
	return nil
}

// checkPipeline is Check for a manifest with launches.
func (m Manifest) checkPipeline(sig []oracle.Param, names map[string]bool) error {
	if m.Kernel != "" || m.Grid != [3]uint32{} || m.Block != [3]uint32{} || m.Cluster != [3]uint32{} || m.SharedBytes != 0 || len(m.Params) > 0 || len(m.Scratch) > 0 {
		return manifestErr("launches: then kernel, grid, block, cluster, sharedBytes, params and scratch belong in each launch, not at the top")
	}
	if len(m.Launches) > MaxLaunches {
		return manifestErr("launches: want 1 to %d, got %d", MaxLaunches, len(m.Launches))
	}
	if len(m.Buffers) > MaxBuffers {
		return manifestErr("buffers: want at most %d, got %d", MaxBuffers, len(m.Buffers))
	}
	var total int64
	for i, b := range m.Buffers {
		if err := b.check(fmt.Sprintf("buffers[%d]", i), MaxBufferBytes); err != nil {
			return err
		}
		if total += b.Bytes; total > MaxBufferBytes {
			return manifestErr("buffers: %d bytes in all, limit %d", total, MaxBufferBytes)
		}
	}
	passed := map[string]bool{}
	used := make([]bool, len(m.Buffers))
	for i, l := range m.Launches {
		seen := map[string]int{}
		scratch, err := l.check(fmt.Sprintf("launches[%d].", i), names, seen, used)
		if err != nil {
			return err
		}
		if scratch > 0 {
			return manifestErr("launches[%d]: a scratch parameter: a pipeline passes buffers (kind buffer, by index)", i)
		}
		for n := range seen {
			passed[n] = true
		}
	}
	for _, p := range sig {
		if !passed[p.Name] {
			return manifestErr("tensor %q of the signature is passed by no launch", p.Name)
		}
	}
	for i, u := range used {
		if !u {
			return manifestErr("buffers[%d]: passed to no launch", i)
		}
	}
	return nil
}

// check checks one launch (where prefixes its fields' names): its kernel,
// shape and parameters, tensors recorded in seen; buffer parameters
// marked in used (nil: none allowed). It returns the number of scratch
// parameters.
func (l Launch) check(where string, names map[string]bool, seen map[string]int, used []bool) (int, error) {
	if !symbolRE.MatchString(l.Kernel) {
		return 0, manifestErr("%skernel: %q is not a symbol", where, l.Kernel)
	}
	if err := l.checkShape(where); err != nil {
		return 0, err
	}
	if len(l.Params) == 0 || len(l.Params) > MaxParams {
		return 0, manifestErr("%sparams: want 1 to %d, got %d", where, MaxParams, len(l.Params))
	}
	scratch := 0
	for i, p := range l.Params {
		if err := checkParam(where, i, p, names, seen, used); err != nil {
			return 0, err
		}
		if p.Kind == Scratch {
			scratch++
		}
	}
	return scratch, nil
}

func (s ScratchSpec) check(where string, limit int64) error {
	if s.Bytes < 0 || s.Bytes > limit {
		return manifestErr("%s.bytes: want 0 to %d, got %d", where, limit, s.Bytes)
	}
	if s.Align < 1 || s.Align > 4096 || s.Align&(s.Align-1) != 0 {
		return manifestErr("%s.align: want a power of two up to 4096, got %d", where, s.Align)
	}
	return nil
}

func manifestErr(format string, args ...any) error {
	return fmt.Errorf("launch manifest: "+format, args...)
}

// checkShape checks the launch's grid, block, cluster and shared memory
// against the device limits.
func (m Launch) checkShape(where string) error {
	for i, d := range m.Grid {
		limit := uint32(MaxGridYZ)
		if i == 0 {
			limit = MaxGridX
		}
		if d < 1 || d > limit {
			return manifestErr("%sgrid[%d]: want 1 to %d, got %d", where, i, limit, d)
		}
	}
	threads := uint64(1)
	for i, d := range m.Block {
		if d < 1 || d > MaxThreadsPerBlock {
			return manifestErr("%sblock[%d]: want 1 to %d, got %d", where, i, MaxThreadsPerBlock, d)
		}
		threads *= uint64(d)
	}
	if threads > MaxThreadsPerBlock {
		return manifestErr("%sblock: %d threads, limit %d", where, threads, MaxThreadsPerBlock)
	}
	blocks := uint64(1)
	for i, d := range m.Cluster {
		if d < 1 {
			return manifestErr("%scluster[%d]: want at least 1, got %d", where, i, d)
		}
		if m.Grid[i]%d != 0 {
			return manifestErr("%scluster[%d]: %d does not divide grid[%d] %d", where, i, d, i, m.Grid[i])
		}
		blocks *= uint64(d)
	}
	if blocks > MaxClusterBlocks {
		return manifestErr("%scluster: %d blocks, limit %d", where, blocks, MaxClusterBlocks)
	}
	if m.SharedBytes > MaxSharedBytes {
		return manifestErr("%ssharedBytes: %d, limit %d", where, m.SharedBytes, MaxSharedBytes)
	}
	return nil
}

// checkParam checks parameter i of a launch (prefix names the launch in
// messages): its kind and the fields the kind takes; a tensor of the
// signature (names), passed once in the launch (seen: by name, the index
// that passed it), a value that parses as its kind, a buffer in range
// (used, marked; nil allows none).
func checkParam(prefix string, i int, p Param, names map[string]bool, seen map[string]int, used []bool) error {
	where := fmt.Sprintf("%sparams[%d]", prefix, i)
	byValue := p.Kind == I32 || p.Kind == I64 || p.Kind == F32
	kinds := []string{Tensor, I32, I64, F32, Scratch}
	if used != nil {
		kinds = append(kinds, Buffer)
	}
	switch {
	case !slices.Contains(kinds, p.Kind):
		return manifestErr("%s: kind %q: want %s", where, p.Kind, strings.Join(kinds, ", "))
	case p.Kind != Tensor && p.Tensor != "":
		return manifestErr("%s: kind %s names tensor %q", where, p.Kind, p.Tensor)
	case byValue && p.Value == "":
		return manifestErr("%s: kind %s: no value", where, p.Kind)
	case !byValue && p.Value != "":
		return manifestErr("%s: kind %s: a value only for i32, i64 and f32", where, p.Kind)
	case p.Kind != Tensor && p.Align != 0:
		return manifestErr("%s: kind %s: an alignment only for a tensor", where, p.Kind)
	case p.Kind != Buffer && p.Buffer != nil:
		return manifestErr("%s: kind %s: a buffer index only for kind buffer", where, p.Kind)
	}
	switch p.Kind {
	case Tensor:
		if !names[p.Tensor] {
			return manifestErr("%s: tensor %q is not in the case's signature", where, p.Tensor)
		}
		if prev, dup := seen[p.Tensor]; dup {
			return manifestErr("%s: tensor %q already passed as params[%d]", where, p.Tensor, prev)
		}
		seen[p.Tensor] = i
		if p.Align < 0 || p.Align > 4096 || p.Align&(p.Align-1) != 0 {
			return manifestErr("%s: align %d: want a power of two up to 4096 (or 0)", where, p.Align)
		}
	case Buffer:
		if p.Buffer == nil || *p.Buffer < 0 || *p.Buffer >= len(used) {
			got := "none"
			if p.Buffer != nil {
				got = strconv.Itoa(*p.Buffer)
			}
			return manifestErr("%s: buffer: want an index below %d (buffers), got %s", where, len(used), got)
		}
		used[*p.Buffer] = true
	case I32, I64:
		bits := 32
		if p.Kind == I64 {
			bits = 64
		}
		if _, err := strconv.ParseInt(string(p.Value), 10, bits); err != nil {
			return manifestErr("%s: %s value %q: want a %d-bit integer", where, p.Kind, p.Value, bits)
		}
	case F32:
		f, err := strconv.ParseFloat(string(p.Value), 32)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return manifestErr("%s: f32 value %q: want a finite 32-bit float", where, p.Value)
		}
	}
	return nil
}

// Lines is the manifest as the CUDA timer reads it, one item a line
// (docs/gpu.md): tensors by their index in the signature, so the timer
// needs no names. A pipeline's form has its buffers first, then each
// launch after a "launch" line; one launch's form is unchanged.
func (m Manifest) Lines(sig []oracle.Param) string {
	index := map[string]int{}
	for i, p := range sig {
		index[p.Name] = i
	}
	var b strings.Builder
	if !m.Pipeline() {
		m.List()[0].lines(&b, m.Arch, index, m.Scratch)
		return b.String()
	}
	fmt.Fprintf(&b, "arch %s\n", m.Arch)
	for _, s := range m.Buffers {
		fmt.Fprintf(&b, "buffer %d %d\n", s.Bytes, s.Align)
	}
	for _, l := range m.Launches {
		b.WriteString("launch\n")
		l.lines(&b, "", index, nil)
	}
	return b.String()
}

// lines writes one launch: its kernel (arch after it where given, as the
// one-launch form always had it), shape and params.
func (l Launch) lines(b *strings.Builder, arch string, index map[string]int, scratch []ScratchSpec) {
	fmt.Fprintf(b, "kernel %s\n", l.Kernel)
	if arch != "" {
		fmt.Fprintf(b, "arch %s\n", arch)
	}
	fmt.Fprintf(b, "grid %d %d %d\nblock %d %d %d\ncluster %d %d %d\nshared %d\n",
		l.Grid[0], l.Grid[1], l.Grid[2], l.Block[0], l.Block[1], l.Block[2], l.Cluster[0], l.Cluster[1], l.Cluster[2], l.SharedBytes)
	s := 0
	for _, p := range l.Params {
		switch p.Kind {
		case Tensor:
			fmt.Fprintf(b, "param tensor %d %d\n", index[p.Tensor], p.Align)
		case Scratch:
			fmt.Fprintf(b, "param scratch %d %d\n", scratch[s].Bytes, scratch[s].Align)
			s++
		case Buffer:
			fmt.Fprintf(b, "param buffer %d\n", *p.Buffer)
		default:
			fmt.Fprintf(b, "param %s %s\n", p.Kind, p.Value)
		}
	}
}

var entryRE = regexp.MustCompile(`(?s)\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\((.*?)\)`)
var paramRE = regexp.MustCompile(`\.param\s+\.([a-z]+[0-9]+)\b`)

// EntryParams reads the parameter types of kernel's entry in ptx, in order
// (u64, u32, f32, ...): what cuLaunchKernel must be given.
func EntryParams(ptx []byte, kernel string) ([]string, error) {
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		if string(m[1]) != kernel {
			continue
		}
		var types []string
		for _, p := range paramRE.FindAllSubmatch(m[2], -1) {
			types = append(types, string(p[1]))
		}
		return types, nil
	}
	return nil, fmt.Errorf("ptx: no .entry %s", kernel)
}

// widths are the PTX parameter types each kind may be passed as.
var widths = map[string][]string{
	Tensor: {"u64", "b64", "s64"}, Scratch: {"u64", "b64", "s64"}, Buffer: {"u64", "b64", "s64"},
	I32: {"u32", "s32", "b32"}, I64: {"u64", "s64", "b64"}, F32: {"f32", "b32"},
}

// MatchPTX checks the manifest's parameters against each launch's kernel
// entry as compiled: the same count, and each of a type its kind is
// passed as. A manifest that disagrees would launch a kernel with its
// arguments in the wrong slots.
func (m Manifest) MatchPTX(ptx []byte) error {
	for i, l := range m.List() {
		where := ""
		if m.Pipeline() {
			where = fmt.Sprintf("launches[%d]: ", i)
		}
		if err := l.matchPTX(ptx, where); err != nil {
			return err
		}
	}
	return nil
}

func (l Launch) matchPTX(ptx []byte, where string) error {
	types, err := EntryParams(ptx, l.Kernel)
	if err != nil {
		return fmt.Errorf("launch manifest: %s%w", where, err)
	}
	if len(types) != len(l.Params) {
		return fmt.Errorf("launch manifest: %s%d params, the PTX entry %s has %d (%s)", where, len(l.Params), l.Kernel, len(types), strings.Join(types, " "))
	}
	for i, p := range l.Params {
		if !slices.Contains(widths[p.Kind], types[i]) {
			return fmt.Errorf("launch manifest: %sparams[%d]: kind %s, the PTX entry passes .%s", where, i, p.Kind, types[i])
		}
	}
	return nil
}
