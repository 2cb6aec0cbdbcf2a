package prepare

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// harnessEntry is the function the harness calls; a build whose entry has
// another name is pointed at it with -Wl,--defsym.
const harnessEntry = "tilepipe_entry"

// linkAllowlist is every linker argument a build may ask for: the C
// runtime and the libraries the built-in routes link. Anything else (a -L,
// -Wl,--wrap, -Wl,--defsym, another library) could put code of the route's
// choosing between the timer and the C library.
var linkAllowlist = append([]string{"-lm", "-lpthread", "-ldl", "-lrt", "-lstdc++", "-lopenblas"}, cudaLibs...)

// loadTimeSections run their code before main, so before the timer starts:
// a route could patch the timer or start a thread there. (.fini_array and
// .dtors are allowed: the harness ends with _exit, so they never run.)
var loadTimeSections = []string{".preinit_array", ".init_array", ".ctors"}

// Constructors are deferred, not refused: an object's section
// deferSection (.init_array, exactly: constructors without a priority,
// as C and C++ compilers emit them, and as Halide's CUDA runtime has one)
// is renamed deferredSection in a copy prepare links, and the timer calls
// the pointers there once, just before the first call of the entry
// (harness.c, route_init): the code runs where the entry's own code could
// run anyway, never before the timer starts. Every other load-time
// section stays refused.
const (
	deferSection    = ".init_array"
	deferredSection = "tilepipe_init"
)

// runtimeLibs are the C runtime shared libraries of the link; a route
// object may not define what they export, which would interpose on the
// functions the timer calls.
var runtimeLibs = []string{"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}

// policyObject is one object of a build: Path as recorded in the capture
// (for messages), File where its bytes lie now; Defer, set by the policy
// check, says it has constructors to defer (deferSection).
type policyObject struct {
	Path  string
	File  string
	Defer bool
}

// timerSymbols are the names no route object may define, each with where
// it comes from ("harness.o defines", "harness.o references" or
// "LIBRARY exports"), and the machine the timer is built for.
type timerSymbols struct {
	from    map[string]string
	machine elf.Machine
	class   elf.Class
}

// loadTimerSymbols reads the compiled harness and the C runtime libraries
// that cc links. An error means the policy could not be set up.
func loadTimerSymbols(ctx context.Context, cc, harnessObj string) (*timerSymbols, error) {
	f, err := elf.Open(harnessObj)
	if err != nil {
		return nil, fmt.Errorf("harness object %s: %w", harnessObj, err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("harness object %s: %w", harnessObj, err)
	}
	t := &timerSymbols{from: map[string]string{}, machine: f.Machine, class: f.Class}
	for _, s := range syms {
		if !exported(s) {
			continue
		}
		switch name := symbolName(s.Name); {
		case s.Section != elf.SHN_UNDEF:
			t.add(name, "harness.o defines")
		case name != harnessEntry: // the one name the route must define
			t.add(name, "harness.o references")
		}
	}
	for _, lib := range runtimeLibs {
		out, err := runOutput(ctx, cc, "-print-file-name="+lib)
		if err != nil {
			return nil, fmt.Errorf("%s -print-file-name=%s: %w", cc, lib, err)
		}
		path := strings.TrimSpace(out)
		if path == lib { // cc did not find it: not part of this C runtime
			continue
		}
		if err := t.addLibrary(lib, path); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *timerSymbols) addLibrary(lib, path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", lib, path, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return fmt.Errorf("%s (%s): %w", lib, path, err)
	}
	for _, s := range syms {
		if exported(s) && s.Section != elf.SHN_UNDEF {
			t.add(symbolName(s.Name), lib+" exports")
		}
	}
	return nil
}

func (t *timerSymbols) add(name, from string) {
	if _, ok := t.from[name]; !ok && name != "" {
		t.from[name] = from
	}
}

// exported says whether the linker may resolve other objects' references
// to s: global, weak and GNU unique (STB_LOOS) bindings.
func exported(s elf.Symbol) bool {
	switch elf.ST_BIND(s.Info) {
	case elf.STB_GLOBAL, elf.STB_WEAK, elf.STB_LOOS:
		return true
	}
	return false
}

// symbolName drops a symbol version (write@@GLIBC_2.2.5 is write).
func symbolName(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	return name
}

// checkLinkPolicy returns why a build may not be linked with the timer, or
// "": its linker arguments must be in [linkAllowlist], and every object
// must be an ELF relocatable object for the timer's machine with no code
// that runs at load time and no definition of a name in timer. The first
// violation is reported: arguments in order, then objects in link order,
// each one's symbols sorted. An error means a file could not be read.
func checkLinkPolicy(objs []policyObject, link []string, timer *timerSymbols) (string, error) {
	for i, a := range link {
		if !slices.Contains(linkAllowlist, a) {
			return fmt.Sprintf("link_policy: link[%d] %q: not in the allowlist (%s)", i, a, strings.Join(linkAllowlist, ", ")), nil
		}
	}
	for i := range objs {
		why, err := checkObject(&objs[i], timer)
		if why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

func checkObject(o *policyObject, timer *timerSymbols) (string, error) {
	b, err := os.ReadFile(o.File)
	if err != nil {
		return "", err
	}
	wantREL := "link_policy: " + o.Path + ": want an ELF relocatable object (ET_REL), got "
	if !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		return wantREL + "a file that is not ELF", nil
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return wantREL + "a malformed ELF file (" + err.Error() + ")", nil
	}
	if f.Type != elf.ET_REL {
		return wantREL + f.Type.String(), nil
	}
	if f.Machine != timer.machine || f.Class != timer.class {
		return fmt.Sprintf("%s%s for %s %s (the timer is %s %s)", wantREL, f.Type, f.Machine, f.Class, timer.machine, timer.class), nil
	}
	for _, s := range f.Sections {
		if s.Name == deferSection && s.Type == elf.SHT_INIT_ARRAY {
			o.Defer = true
			continue
		}
		if s.Name == deferredSection || s.Name == ".rela"+deferredSection || s.Name == ".rel"+deferredSection {
			return fmt.Sprintf("link_policy: %s: section %s: the name prepare gives deferred constructors", o.Path, s.Name), nil
		}
		if loadTime(s) {
			return fmt.Sprintf("link_policy: %s: section %s: code that runs before the entry is first called", o.Path, s.Name), nil
		}
	}
	syms, err := f.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) {
		return "", nil
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, new(*elf.FormatError)) {
			return fmt.Sprintf("link_policy: %s: symbol table: %v", o.Path, err), nil
		}
		return "", err
	}
	var defined []elf.Symbol
	for _, s := range syms {
		if exported(s) && s.Section != elf.SHN_UNDEF {
			defined = append(defined, s)
		}
	}
	slices.SortFunc(defined, func(a, b elf.Symbol) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range defined {
		if elf.ST_TYPE(s.Info) == elf.STT_LOOS { // STT_GNU_IFUNC
			return fmt.Sprintf("link_policy: %s: symbol %s is an ifunc, whose resolver runs before the entry is first called", o.Path, s.Name), nil
		}
		if _, ok := timer.from[symbolName(s.Name)]; ok {
			return fmt.Sprintf("link_policy: %s defines %s, which the timer or the C library provides", o.Path, s.Name), nil
		}
	}
	return "", nil
}

// loadTime says whether a section holds code (or pointers to code) that
// runs before main: by the names the linker script gathers into the
// startup arrays, by its type, or .init, which is spliced into _init.
func loadTime(s *elf.Section) bool {
	if s.Type == elf.SHT_INIT_ARRAY || s.Type == elf.SHT_PREINIT_ARRAY || s.Name == ".init" {
		return true
	}
	for _, p := range loadTimeSections {
		if strings.HasPrefix(s.Name, p) {
			return true
		}
	}
	return false
}
