package visit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Pools and their gaps (docs/protocol.md, "Buffer sets and memory files").
const (
	PoolWarm  = "warm"
	PoolFresh = "fresh"
	WarmGap   = 4096
	FreshGap  = 64
	setAlign  = 64
	page      = 4096
)

// Layout places the sets of one param in one pool's memory file.
type Layout struct {
	Pool  string
	Sets  int
	Gap   int
	Bytes int // one set's bytes
}

// NewLayout is the layout of a pool with the protocol's gap.
func NewLayout(pool string, sets, bytes int) Layout {
	gap := WarmGap
	if pool == PoolFresh {
		gap = FreshGap
	}
	return Layout{Pool: pool, Sets: sets, Gap: gap, Bytes: bytes}
}

// Offset is where set s starts.
func (l Layout) Offset(s int) int {
	return l.Gap + s*((l.Bytes+setAlign-1)/setAlign*setAlign+l.Gap)
}

// Size is the memory file's size.
func (l Layout) Size() int { return (l.Offset(l.Sets) + page - 1) / page * page }

func canary(o int) byte { return byte(0xA5 ^ (o & 0xff)) }

// MemFile is one (param, pool) memory file: replay's mapping of it and the
// descriptor a visit inherits.
type MemFile struct {
	Name   string // param name, for reasons
	Layout Layout
	File   *os.File
	mem    []byte
}

// newMemFile creates a memory file with canary bytes everywhere.
func newMemFile(name string, l Layout, sealable bool) (*MemFile, error) {
	flags := unix.MFD_CLOEXEC
	if sealable {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate("tilepipe-"+l.Pool+"-"+name, flags)
	if err != nil {
		return nil, fmt.Errorf("memory file for %s %s: %w", name, l.Pool, err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name+"-"+l.Pool)
	if err := f.Truncate(int64(l.Size())); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory file for %s %s: %w", name, l.Pool, err)
	}
	mem, err := unix.Mmap(fd, 0, l.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("memory file for %s %s: map: %w", name, l.Pool, err)
	}
	// Canary in the gaps; the sets' data is written next (inputs, Fill).
	o := 0
	for s := 0; s <= l.Sets; s++ {
		end := len(mem)
		if s < l.Sets {
			end = l.Offset(s)
		}
		for ; o < end; o++ {
			mem[o] = canary(o)
		}
		o = end + l.Bytes
	}
	return &MemFile{Name: name, Layout: l, File: f, mem: mem}, nil
}

// NewInput makes a sealed input file holding sets (one []byte per set):
// after it returns nobody can change a byte of it, and a timer can map it
// only read-only.
func NewInput(name string, l Layout, sets [][]byte) (*MemFile, error) {
	if len(sets) != l.Sets {
		return nil, fmt.Errorf("input %s %s: %d sets, layout has %d", name, l.Pool, len(sets), l.Sets)
	}
	m, err := newMemFile(name, l, true)
	if err != nil {
		return nil, err
	}
	for s, b := range sets {
		if len(b) != l.Bytes {
			m.Close()
			return nil, fmt.Errorf("input %s %s set %d: %d bytes, want %d", name, l.Pool, s, len(b), l.Bytes)
		}
		copy(m.mem[l.Offset(s):], b)
	}
	// Our own mapping is writable and shared: it must go before the seal.
	if err := unix.Munmap(m.mem); err != nil {
		m.Close()
		return nil, err
	}
	m.mem = nil
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(m.File.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		m.Close()
		return nil, fmt.Errorf("input %s %s: seal: %w", name, l.Pool, err)
	}
	mem, err := unix.Mmap(int(m.File.Fd()), 0, l.Size(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("input %s %s: map: %w", name, l.Pool, err)
	}
	m.mem = mem
	return m, nil
}

// NewNovelInput makes an input file that replay rewrites between samples
// (docs/protocol4-design.md): replay keeps its writable mapping, and the
// file is sealed with F_SEAL_FUTURE_WRITE, so no mapping made after it
// (the timer's) can be writable, none can be made writable with mprotect,
// and write(2) is refused. The sets hold canary until [MemFile.Write]
// fills them.
func NewNovelInput(name string, l Layout) (*MemFile, error) {
	m, err := newMemFile(name, l, true)
	if err != nil {
		return nil, err
	}
	seals := unix.F_SEAL_FUTURE_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(m.File.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		m.Close()
		return nil, fmt.Errorf("input %s %s: seal: %w", name, l.Pool, err)
	}
	return m, nil
}

// Write copies b into set s of a file replay can write (an output, or a
// novel input, which only replay's mapping can change).
func (m *MemFile) Write(s int, b []byte) error {
	if len(b) != m.Layout.Bytes {
		return fmt.Errorf("%s %s set %d: %d bytes, want %d", m.Name, m.Layout.Pool, s, len(b), m.Layout.Bytes)
	}
	copy(m.Set(s), b)
	return nil
}

// NewOutput makes an output file: canary bytes everywhere, set data
// included (the timer poisons what it validates; replay fills the rest).
func NewOutput(name string, l Layout) (*MemFile, error) { return newMemFile(name, l, false) }

// Set is set s's bytes, as the timer sees them now (not a copy).
func (m *MemFile) Set(s int) []byte {
	o := m.Layout.Offset(s)
	return m.mem[o : o+m.Layout.Bytes]
}

// Fill writes pattern (one element's bytes) over every element of every set.
func (m *MemFile) Fill(pattern []byte) {
	for s := range m.Layout.Sets {
		d := m.Set(s)
		copy(d, pattern)
		repeat(d, len(pattern))
	}
}

// repeat copies d's first n bytes over the rest of d, in doubling copies
// (memmove's speed, where a byte or an element at a time was a tenth of it
// on a set of hundreds of MiB).
func repeat(d []byte, n int) {
	for n > 0 && n < len(d) {
		n += copy(d[n:], d[:n])
	}
}

// CheckCanary names the first changed canary byte.
func (m *MemFile) CheckCanary() error {
	o := 0
	for s := 0; s <= m.Layout.Sets; s++ {
		end := len(m.mem)
		if s < m.Layout.Sets {
			end = m.Layout.Offset(s)
		}
		for ; o < end; o++ {
			if m.mem[o] != canary(o) {
				return fail("guard_overwritten: %s %s byte %d", m.Name, m.Layout.Pool, o)
			}
		}
		o = end + m.Layout.Bytes
	}
	return nil
}

// FirstDiff is the first element (of size elem) where set s differs from want, or -1.
func (m *MemFile) FirstDiff(s int, want []byte, elem int) int {
	got := m.Set(s)
	if bytes.Equal(got, want) {
		return -1
	}
	for i := 0; i < len(got); i += elem {
		if !bytes.Equal(got[i:i+elem], want[i:i+elem]) {
			return i / elem
		}
	}
	return -1
}

// Close unmaps and closes the file.
func (m *MemFile) Close() error {
	if m.mem != nil {
		unix.Munmap(m.mem)
		m.mem = nil
	}
	return m.File.Close()
}

// FillPattern is one element of the fill a visit's outputs get before
// its timed samples, from the visit's draw: a signalling NaN for floats
// (never a poison, which are quiet NaNs, nor a value an op computes), a
// negative number for i64 (never an index).
func FillPattern(dtype string, draw uint64) []byte {
	switch dtype {
	case "f32":
		return binary.LittleEndian.AppendUint32(nil, uint32(draw>>63)<<31|(0x7F800001+uint32(draw%0x3FFFFF)))
	case "f16":
		return binary.LittleEndian.AppendUint16(nil, uint16(draw>>63)<<15|(0x7C01+uint16(draw%0x1FF)))
	case "bf16":
		return binary.LittleEndian.AppendUint16(nil, uint16(draw>>63)<<15|(0x7F81+uint16(draw%0x3F)))
	default: // i64
		return binary.LittleEndian.AppendUint64(nil, uint64(-1-int64(draw>>2)))
	}
}
