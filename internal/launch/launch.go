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
}

// Param is one kernel parameter in launch order.
type Param struct {
	Kind   string `json:"kind"`
	Tensor string `json:"tensor,omitempty"` // Tensor: the signature name
	// Value is an integer or float parameter's value, as compiled: a
	// shape or stride is part of what the kernel was specialised for.
	Value json.Number `json:"value,omitempty"`
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
func (m Manifest) Check(sig []oracle.Param) error {
	if !symbolRE.MatchString(m.Kernel) {
		return manifestErr("kernel: %q is not a symbol", m.Kernel)
	}
	if !archRE.MatchString(m.Arch) {
		return manifestErr("arch: want sm_NN (the compute capability built for), got %q", m.Arch)
	}
	if err := CheckPtxas(m.Ptxas); err != nil {
		return err
	}
	if err := m.checkShape(); err != nil {
		return err
	}
	if len(m.Params) == 0 || len(m.Params) > MaxParams {
		return manifestErr("params: want 1 to %d, got %d", MaxParams, len(m.Params))
	}
	names := map[string]bool{}
	for _, p := range sig {
		names[p.Name] = true
	}
	seen := map[string]int{}
	scratch := 0
	for i, p := range m.Params {
		if err := checkParam(i, p, names, seen); err != nil {
			return err
		}
		if p.Kind == Scratch {
			scratch++
		}
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
		if s.Bytes < 0 || s.Bytes > MaxScratchBytes {
			return manifestErr("scratch[%d].bytes: want 0 to %d, got %d", i, MaxScratchBytes, s.Bytes)
		}
		if s.Align < 1 || s.Align > 4096 || s.Align&(s.Align-1) != 0 {
			return manifestErr("scratch[%d].align: want a power of two up to 4096, got %d", i, s.Align)
		}
	}
	return nil
}

func manifestErr(format string, args ...any) error {
	return fmt.Errorf("launch manifest: "+format, args...)
}

// checkShape checks the launch's grid, block, cluster and shared memory
// against the device limits.
func (m Manifest) checkShape() error {
	for i, d := range m.Grid {
		limit := uint32(MaxGridYZ)
		if i == 0 {
			limit = MaxGridX
		}
		if d < 1 || d > limit {
			return manifestErr("grid[%d]: want 1 to %d, got %d", i, limit, d)
		}
	}
	threads := uint64(1)
	for i, d := range m.Block {
		if d < 1 || d > MaxThreadsPerBlock {
			return manifestErr("block[%d]: want 1 to %d, got %d", i, MaxThreadsPerBlock, d)
		}
		threads *= uint64(d)
	}
	if threads > MaxThreadsPerBlock {
		return manifestErr("block: %d threads, limit %d", threads, MaxThreadsPerBlock)
	}
	blocks := uint64(1)
	for i, d := range m.Cluster {
		if d < 1 {
			return manifestErr("cluster[%d]: want at least 1, got %d", i, d)
		}
		if m.Grid[i]%d != 0 {
			return manifestErr("cluster[%d]: %d does not divide grid[%d] %d", i, d, i, m.Grid[i])
		}
		blocks *= uint64(d)
	}
	if blocks > MaxClusterBlocks {
		return manifestErr("cluster: %d blocks, limit %d", blocks, MaxClusterBlocks)
	}
	if m.SharedBytes > MaxSharedBytes {
		return manifestErr("sharedBytes: %d, limit %d", m.SharedBytes, MaxSharedBytes)
	}
	return nil
}

// checkParam checks parameter i: its kind and the fields the kind takes;
// a tensor of the signature (names), passed once (seen, by name, the
// index that passed it), a value that parses as its kind.
func checkParam(i int, p Param, names map[string]bool, seen map[string]int) error {
	where := fmt.Sprintf("params[%d]", i)
	byValue := p.Kind == I32 || p.Kind == I64 || p.Kind == F32
	switch {
	case !byValue && p.Kind != Tensor && p.Kind != Scratch:
		return manifestErr("%s: kind %q: want %s", where, p.Kind, strings.Join([]string{Tensor, I32, I64, F32, Scratch}, ", "))
	case p.Kind != Tensor && p.Tensor != "":
		return manifestErr("%s: kind %s names tensor %q", where, p.Kind, p.Tensor)
	case byValue && p.Value == "":
		return manifestErr("%s: kind %s: no value", where, p.Kind)
	case !byValue && p.Value != "":
		return manifestErr("%s: kind %s: a value only for i32, i64 and f32", where, p.Kind)
	case p.Kind != Tensor && p.Align != 0:
		return manifestErr("%s: kind %s: an alignment only for a tensor", where, p.Kind)
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
// needs no names.
func (m Manifest) Lines(sig []oracle.Param) string {
	index := map[string]int{}
	for i, p := range sig {
		index[p.Name] = i
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kernel %s\narch %s\ngrid %d %d %d\nblock %d %d %d\ncluster %d %d %d\nshared %d\n",
		m.Kernel, m.Arch, m.Grid[0], m.Grid[1], m.Grid[2], m.Block[0], m.Block[1], m.Block[2], m.Cluster[0], m.Cluster[1], m.Cluster[2], m.SharedBytes)
	s := 0
	for _, p := range m.Params {
		switch p.Kind {
		case Tensor:
			fmt.Fprintf(&b, "param tensor %d %d\n", index[p.Tensor], p.Align)
		case Scratch:
			fmt.Fprintf(&b, "param scratch %d %d\n", m.Scratch[s].Bytes, m.Scratch[s].Align)
			s++
		default:
			fmt.Fprintf(&b, "param %s %s\n", p.Kind, p.Value)
		}
	}
	return b.String()
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
	Tensor: {"u64", "b64", "s64"}, Scratch: {"u64", "b64", "s64"},
	I32: {"u32", "s32", "b32"}, I64: {"u64", "s64", "b64"}, F32: {"f32", "b32"},
}

// MatchPTX checks the manifest's parameters against the kernel's entry as
// compiled: the same count, and each of a type its kind is passed as. A
// manifest that disagrees would launch the kernel with its arguments in
// the wrong slots.
func (m Manifest) MatchPTX(ptx []byte) error {
	types, err := EntryParams(ptx, m.Kernel)
	if err != nil {
		return fmt.Errorf("launch manifest: %w", err)
	}
	if len(types) != len(m.Params) {
		return fmt.Errorf("launch manifest: %d params, the PTX entry %s has %d (%s)", len(m.Params), m.Kernel, len(types), strings.Join(types, " "))
	}
	for i, p := range m.Params {
		ok := false
		for _, w := range widths[p.Kind] {
			ok = ok || w == types[i]
		}
		if !ok {
			return fmt.Errorf("launch manifest: params[%d]: kind %s, the PTX entry passes .%s", i, p.Kind, types[i])
		}
	}
	return nil
}
