package visit

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInputSealed: nobody can write an input file after NewInput, through
// a new writable mapping, a write(2) or a resize, and the seals cannot be
// lifted.
func TestInputSealed(t *testing.T) {
	l := NewLayout(PoolWarm, 2, 100)
	m, err := NewInput("A", l, [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 100)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fd := int(m.File.Fd())
	if _, err := unix.Mmap(fd, 0, l.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != unix.EPERM {
		t.Errorf("writable shared mapping of a sealed input = %v, want EPERM", err)
	}
	if _, err := unix.Pwrite(fd, []byte{9}, int64(l.Offset(0))); err != unix.EPERM {
		t.Errorf("pwrite to a sealed input = %v, want EPERM", err)
	}
	if err := unix.Ftruncate(fd, 0); err != unix.EPERM {
		t.Errorf("truncating a sealed input = %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, 0); err != unix.EPERM {
		t.Errorf("changing a sealed input's seals = %v, want EPERM", err)
	}
	if !bytes.Equal(m.Set(1), bytes.Repeat([]byte{2}, 100)) || m.CheckCanary() != nil {
		t.Errorf("input set 1 = %v, canary %v; want the set's bytes and whole canaries", m.Set(1)[:4], m.CheckCanary())
	}
	if _, err := NewInput("A", l, [][]byte{make([]byte, 100)}); err == nil || !strings.Contains(err.Error(), "1 sets, layout has 2") {
		t.Errorf("NewInput with one set of two = %v", err)
	}
	if _, err := NewInput("A", l, [][]byte{make([]byte, 100), make([]byte, 99)}); err == nil || !strings.Contains(err.Error(), "set 1: 99 bytes, want 100") {
		t.Errorf("NewInput with a short set = %v", err)
	}
}

// TestNovelInputSealed: a timer (any mapping made after NewNovelInput)
// cannot write a novel input file, not through a writable mapping, an
// mprotect of a read-only one, write(2), a reopened descriptor or a
// resize, while replay's own mapping writes it and the timer's mapping
// sees the new bytes at once.
func TestNovelInputSealed(t *testing.T) {
	l := NewLayout(PoolFresh, 2, 100)
	m, err := NewNovelInput("A", l)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fd := int(m.File.Fd())
	if _, err := unix.Mmap(fd, 0, l.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != unix.EPERM {
		t.Errorf("writable shared mapping of a novel input = %v, want EPERM", err)
	}
	ro, err := unix.Mmap(fd, 0, l.Size(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	if err := unix.Mprotect(ro, unix.PROT_READ|unix.PROT_WRITE); err != unix.EACCES {
		t.Errorf("mprotect of the timer's read-only mapping to writable = %v, want EACCES", err)
	}
	if _, err := unix.Pwrite(fd, []byte{9}, int64(l.Offset(0))); err != unix.EPERM {
		t.Errorf("pwrite to a novel input = %v, want EPERM", err)
	}
	re, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(re, []byte{9}, int64(l.Offset(0))); err != unix.EPERM {
		t.Errorf("pwrite through a reopened descriptor = %v, want EPERM", err)
	}
	unix.Close(re)
	if err := unix.Ftruncate(fd, 0); err != unix.EPERM {
		t.Errorf("truncating a novel input = %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, 0); err != unix.EPERM {
		t.Errorf("changing a novel input's seals = %v, want EPERM", err)
	}
	if err := m.Write(1, bytes.Repeat([]byte{7}, 100)); err != nil {
		t.Fatal(err)
	}
	if o := l.Offset(1); !bytes.Equal(ro[o:o+100], bytes.Repeat([]byte{7}, 100)) || m.CheckCanary() != nil {
		t.Errorf("the timer's view of set 1 after replay's write = %v, canary %v; want replay's bytes", ro[o:o+4], m.CheckCanary())
	}
	if err := m.Write(0, make([]byte, 99)); err == nil || !strings.Contains(err.Error(), "set 0: 99 bytes, want 100") {
		t.Errorf("Write of a short set = %v", err)
	}
}

// TestOutputCanary: a changed byte outside the sets' data is named; one
// inside is not a canary.
func TestOutputCanary(t *testing.T) {
	l := NewLayout(PoolFresh, 3, 10)
	if l.Offset(0) != 64 || l.Offset(1) != 64+64+64 || l.Size() != 4096 {
		t.Fatalf("layout offsets %d %d size %d, want 64 192 4096", l.Offset(0), l.Offset(1), l.Size())
	}
	m, err := NewOutput("C", l)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Set(1)[9] ^= 0xff // data
	if err := m.CheckCanary(); err != nil {
		t.Errorf("a data byte changed: %v, want no canary failure", err)
	}
	for _, o := range []int{0, l.Offset(1) + 10, l.Size() - 1} {
		m.mem[o] ^= 1
		if err := m.CheckCanary(); err == nil || err.Error() != "guard_overwritten: C fresh byte "+itoa(o) {
			t.Errorf("canary byte %d changed: %v", o, err)
		}
		m.mem[o] ^= 1
	}
	want := bytes.Repeat([]byte{7, 8}, 5)
	copy(m.Set(2), want)
	if e := m.FirstDiff(2, want, 2); e != -1 {
		t.Errorf("FirstDiff of equal bytes = %d, want -1", e)
	}
	m.Set(2)[7] = 0
	if e := m.FirstDiff(2, want, 2); e != 3 {
		t.Errorf("FirstDiff with byte 7 changed = element %d, want 3", e)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFillPattern: the fill is never a poison, never a finite float nor a
// quiet NaN, never a non-negative index, whatever the draw.
func TestFillPattern(t *testing.T) {
	poisons := map[string][][]byte{
		"f32": {{0xAD, 0xDE, 0xC0, 0x7F}, {0xEF, 0xBE, 0xC0, 0x7F}},
		"f16": {{0x5D, 0x7E}, {0x5E, 0x7E}}, "bf16": {{0xDE, 0x7F}, {0xBE, 0x7F}},
		"i64": {{0xAD, 0xDE, 0xAD, 0xDE, 0xAD, 0xDE, 0xF8, 0x7F}, {0xEF, 0xBE, 0xEF, 0xBE, 0xEF, 0xBE, 0xF8, 0x7F}},
	}
	for _, draw := range []uint64{0, 1, 0x3FFFFE, 0x3FFFFF, 1 << 63, math.MaxUint64, 0x123456789abcdef} {
		for dtype, ps := range poisons {
			f := FillPattern(dtype, draw)
			for _, p := range ps {
				if bytes.Equal(f, p) {
					t.Errorf("FillPattern(%s, %#x) = a poison", dtype, draw)
				}
			}
			switch dtype {
			case "f32":
				b := binary.LittleEndian.Uint32(f)
				if b&0x7F800000 != 0x7F800000 || b&0x7FFFFF == 0 || b&0x400000 != 0 {
					t.Errorf("FillPattern(f32, %#x) = %#x, want a signalling NaN", draw, b)
				}
			case "f16":
				b := binary.LittleEndian.Uint16(f)
				if b&0x7C00 != 0x7C00 || b&0x3FF == 0 || b&0x200 != 0 {
					t.Errorf("FillPattern(f16, %#x) = %#x, want a signalling NaN", draw, b)
				}
			case "bf16":
				b := binary.LittleEndian.Uint16(f)
				if b&0x7F80 != 0x7F80 || b&0x7F == 0 || b&0x40 != 0 {
					t.Errorf("FillPattern(bf16, %#x) = %#x, want a signalling NaN", draw, b)
				}
			case "i64":
				if v := int64(binary.LittleEndian.Uint64(f)); v >= 0 {
					t.Errorf("FillPattern(i64, %#x) = %d, want negative", draw, v)
				}
			}
		}
	}
}

// TestMemFileBytes: a new file is canary at every byte outside the sets,
// and Fill writes its pattern over every element of every set, nothing
// else, for sizes around the doubling copies' steps.
func TestMemFileBytes(t *testing.T) {
	pattern := []byte{0x11, 0x22, 0x33, 0x44}
	for _, bytes := range []int{4, 252, 256, 260, 4096, 70004} {
		for _, pool := range []string{PoolWarm, PoolFresh} {
			l := NewLayout(pool, 3, bytes)
			m, err := NewOutput("C", l)
			if err != nil {
				t.Fatal(err)
			}
			m.Fill(pattern)
			in := func(o int) int {
				for s := range l.Sets {
					if o >= l.Offset(s) && o < l.Offset(s)+bytes {
						return o - l.Offset(s)
					}
				}
				return -1
			}
			for o, b := range m.mem {
				want := canary(o)
				if i := in(o); i >= 0 {
					want = pattern[i%len(pattern)]
				}
				if b != want {
					t.Fatalf("%s %d bytes a set: byte %d = %#x, want %#x", pool, bytes, o, b, want)
				}
			}
			m.Close()
		}
	}
}
