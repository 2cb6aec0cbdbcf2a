package prepare

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/prepare/harness"
)

// testTimer compiles the real harness, as prepare does, and loads its
// symbols and the C runtime's.
func testTimer(t *testing.T) *timerSymbols {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "harness.c")
	if err := os.WriteFile(src, harness.Source, 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "harness.o")
	argv := append(append([]string{}, DefaultConfig.CFlags...), "-c", src, "-o", obj)
	if out, err := exec.Command(DefaultConfig.CC, argv...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", argv, err, out)
	}
	timer, err := loadTimerSymbols(context.Background(), DefaultConfig.CC, obj)
	if err != nil {
		t.Fatalf("loadTimerSymbols: %v", err)
	}
	return timer
}

// testObject is one object file of a case: C source built with cc and
// args (default -O1 -c), or raw bytes written as they are.
type testObject struct {
	path string // as the capture records it
	src  string
	args []string
	raw  []byte
}

// build writes o into dir, compiling its source, and returns it as the
// policy sees it.
func (o testObject) build(t *testing.T, dir string) policyObject {
	t.Helper()
	file := filepath.Join(dir, o.path)
	if o.raw != nil {
		if err := os.WriteFile(file, o.raw, 0o444); err != nil {
			t.Fatal(err)
		}
		return policyObject{Path: o.path, File: file}
	}
	src := file + ".c"
	if err := os.WriteFile(src, []byte(o.src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := o.args
	if args == nil {
		args = []string{"-O1", "-c"}
	}
	argv := append(append([]string{}, args...), "-o", file, src)
	if out, err := exec.Command("cc", argv...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", argv, err, out)
	}
	return policyObject{Path: o.path, File: file}
}

const (
	honestKernel = `#include <math.h>
#include <string.h>
volatile int armed;
int tilepipe_entry(void *const *buf) {
  const float *x = buf[0];
  float *y = buf[1];
  for (int i = 0; i < 16; i++) y[i] = expf(x[i]);
  memcpy(y + 16, y, 4 * sizeof *y);
  return 0;
}
`
	// bareKernel needs no headers and no library.
	bareKernel = `int tilepipe_entry(void *const *buf) {
  const float *x = buf[0];
  float *y = buf[1];
  for (int i = 0; i < 16; i++) y[i] = 2 * x[i];
  return 0;
}
`
	allow = "(-lm, -lpthread, -ldl, -lrt, -lstdc++, -lopenblas, -lcublas, -lcublasLt, -lcudart)"
)

func obj(path, src string) testObject { return testObject{path: path, src: src} }

func TestLinkPolicy(t *testing.T) {
	timer := testTimer(t)
	kernel := obj("kernel.o", honestKernel)
	for _, tc := range []struct {
		name string
		objs []testObject
		link []string
		want string
	}{
		// Honest builds.
		{"plain kernel", []testObject{kernel}, []string{"-lpthread", "-ldl", "-lm"}, ""},
		{"every allowed library", []testObject{kernel}, []string{"-lm", "-lpthread", "-ldl", "-lrt", "-lstdc++", "-lopenblas"}, ""},
		{"destructor", []testObject{kernel, obj("fini.o", `#include <stdio.h>
__attribute__((destructor)) static void bye(void) { puts("bye"); }`)}, nil, ""},
		{"static clock_gettime", []testObject{obj("kernel.o", honestKernel+`
static int clock_gettime(int c, void *ts) { (void)c; (void)ts; return 0; }
int tilepipe_helper(void) { return clock_gettime(1, 0); }`)}, nil, ""},
		{"entry by another name", []testObject{obj("kernel.o", `int gemm_entry(void *const *b) { (void)b; return 0; }`)}, nil, ""},

		// 1. Linker arguments.
		{"wrap clock_gettime", []testObject{kernel}, []string{"-Wl,--wrap=clock_gettime"},
			`link_policy: link[0] "-Wl,--wrap=clock_gettime": not in the allowlist ` + allow},
		{"library path", []testObject{kernel}, []string{"-lm", "-L/tmp"},
			`link_policy: link[1] "-L/tmp": not in the allowlist ` + allow},
		{"other library", []testObject{kernel}, []string{"-lpthread", "-ldl", "-lfoo"},
			`link_policy: link[2] "-lfoo": not in the allowlist ` + allow},
		{"defsym", []testObject{kernel}, []string{"-Wl,--defsym=clock_gettime=fake"},
			`link_policy: link[0] "-Wl,--defsym=clock_gettime=fake": not in the allowlist ` + allow},
		{"rpath", []testObject{kernel}, []string{"-Wl,-rpath,/tmp/x", "-lm"},
			`link_policy: link[0] "-Wl,-rpath,/tmp/x": not in the allowlist ` + allow},
		{"two arguments in one", []testObject{kernel}, []string{"-lm -Wl,--wrap=write"},
			`link_policy: link[0] "-lm -Wl,--wrap=write": not in the allowlist ` + allow},
		{"arguments before objects", []testObject{obj("kernel.o", `int main(void) { return 0; }`)}, []string{"-lfoo"},
			`link_policy: link[0] "-lfoo": not in the allowlist ` + allow},

		// 2. ELF relocatable objects only.
		{"shared object", []testObject{{path: "kernel.o", src: honestKernel, args: []string{"-O1", "-shared", "-fPIC"}}}, nil,
			"link_policy: kernel.o: want an ELF relocatable object (ET_REL), got ET_DYN"},
		{"executable", []testObject{{path: "kernel.o", src: bareKernel + "int main(void) { return 0; }\n", args: []string{"-O1", "-no-pie"}}}, nil,
			"link_policy: kernel.o: want an ELF relocatable object (ET_REL), got ET_EXEC"},
		{"not ELF", []testObject{kernel, {path: "entry.o", raw: []byte("!<arch>\nnot an object\n")}}, nil,
			"link_policy: entry.o: want an ELF relocatable object (ET_REL), got a file that is not ELF"},
		{"empty file", []testObject{{path: "kernel.o", raw: []byte{}}}, nil,
			"link_policy: kernel.o: want an ELF relocatable object (ET_REL), got a file that is not ELF"},

		// 3. No code that runs at load time.
		// A constructor without a priority is deferred to the first call
		// (TestConstructorsDeferred), not refused.
		{"constructor", []testObject{obj("kernel.o", honestKernel+`
__attribute__((constructor)) static void early(void) { armed = 1; }`)}, nil, ""},
		// The bounds the timer walks to run deferred constructors are the
		// linker's: an object may not define them to aim the timer at a
		// list of its own.
		{"deferred constructors' bounds", []testObject{obj("kernel.o", honestKernel+`
static void early(void) {}
void (*const __start_tilepipe_init[])(void) = {early};`)}, nil,
			"link_policy: kernel.o defines __start_tilepipe_init, which the timer or the C library provides"},
		{"the deferred section's name", []testObject{obj("kernel.o", honestKernel+`
static void early(void) {}
__attribute__((section("tilepipe_init"), used)) static void (*p)(void) = early;`)}, nil,
			"link_policy: kernel.o: section tilepipe_init: the name prepare gives deferred constructors"},
		{"constructor with a priority", []testObject{obj("kernel.o", honestKernel+`
__attribute__((constructor(101))) static void early(void) { armed = 1; }`)}, nil,
			"link_policy: kernel.o: section .init_array.00101: code that runs before the entry is first called"},
		{"ctors pointer", []testObject{kernel, obj("ctor.o", `static void early(void) {}
__attribute__((section(".ctors"), used)) static void (*p)(void) = early;`)}, nil,
			"link_policy: ctor.o: section .ctors: code that runs before the entry is first called"},
		{"ctors with a priority", []testObject{obj("ctor.o", `static void early(void) {}
__attribute__((section(".ctors.65535"), used)) static void (*p)(void) = early;`)}, nil,
			"link_policy: ctor.o: section .ctors.65535: code that runs before the entry is first called"},
		{"preinit_array", []testObject{obj("kernel.o", honestKernel+`
static void early(void) {}
__attribute__((section(".preinit_array"), used)) static void (*p)(void) = early;`)}, nil,
			"link_policy: kernel.o: section .preinit_array: code that runs before the entry is first called"},
		{"init_array under another name", []testObject{obj("kernel.o", honestKernel+`
static void early(void) {}
__asm__(".section .data.startup,\"aw\",@init_array\n.quad early\n.text");`)}, nil,
			"link_policy: kernel.o: section .data.startup: code that runs before the entry is first called"},
		{"init code", []testObject{obj("kernel.o", honestKernel+`
__asm__(".section .init,\"ax\",@progbits\nnop\n.text");`)}, nil,
			"link_policy: kernel.o: section .init: code that runs before the entry is first called"},
		{"ifunc", []testObject{obj("kernel.o", honestKernel+`
static void fast(void) {}
static void (*pick(void))(void) { return fast; }
void kernel_dispatch(void) __attribute__((ifunc("pick")));`)}, nil,
			"link_policy: kernel.o: symbol kernel_dispatch is an ifunc, whose resolver runs before the entry is first called"},

		// 4. No definition of what the timer or the C library provides.
		{"clock_gettime", []testObject{obj("kernel.o", honestKernel+`
int clock_gettime(int c, void *ts) { (void)c; (void)ts; return 0; }`)}, nil,
			"link_policy: kernel.o defines clock_gettime, which the timer or the C library provides"},
		{"weak memcpy", []testObject{obj("kernel.o", `#include <stddef.h>
__attribute__((weak)) void *memcpy(void *d, const void *s, size_t n) { (void)s; (void)n; return d; }
int tilepipe_entry(void *const *b) { (void)b; return 0; }`)}, nil,
			"link_policy: kernel.o defines memcpy, which the timer or the C library provides"},
		{"hidden write", []testObject{obj("kernel.o", honestKernel+`
__attribute__((visibility("hidden"))) long write(int fd, const void *b, unsigned long n) { (void)fd; (void)b; return (long)n; }`)}, nil,
			"link_policy: kernel.o defines write, which the timer or the C library provides"},
		{"versioned write", []testObject{obj("kernel.o", honestKernel+`
__asm__(".symver my_write, write@@GLIBC_2.2.5");
long my_write(int fd, const void *b, unsigned long n) { (void)fd; (void)b; return (long)n; }`)}, nil,
			"link_policy: kernel.o defines write@@GLIBC_2.2.5, which the timer or the C library provides"},
		{"entry named main", []testObject{obj("kernel.o", `int main(void *const *b) { (void)b; return 0; }`)}, nil,
			"link_policy: kernel.o defines main, which the timer or the C library provides"},
		{"unique stdout", []testObject{kernel, obj("data.o", `__asm__(".globl stdout\n.section .data.u,\"aw\"\n.type stdout, @gnu_unique_object\nstdout: .quad 0\n.text");`)}, nil,
			"link_policy: data.o defines stdout, which the timer or the C library provides"},
		{"common daylight", []testObject{{path: "kernel.o", src: honestKernel + "int daylight;\n", args: []string{"-O1", "-fcommon", "-c"}}}, nil,
			"link_policy: kernel.o defines daylight, which the timer or the C library provides"},
		{"libm expf", []testObject{obj("kernel.o", `float expf(float x) { return x; }
int tilepipe_entry(void *const *b) { (void)b; return 0; }`)}, nil,
			"link_policy: kernel.o defines expf, which the timer or the C library provides"},
		{"first of sorted symbols", []testObject{obj("kernel.o", honestKernel+`
long write(int fd, const void *b, unsigned long n) { (void)fd; (void)b; return (long)n; }
int clock_gettime(int c, void *ts) { (void)c; (void)ts; return 0; }`)}, nil,
			"link_policy: kernel.o defines clock_gettime, which the timer or the C library provides"},
		{"first object in link order", []testObject{
			obj("entry.o", `int read(int fd) { return fd; }`),
			obj("kernel.o", honestKernel+"__attribute__((constructor)) static void early(void) { armed = 1; }\n")}, nil,
			"link_policy: entry.o defines read, which the timer or the C library provides"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var objs []policyObject
			for _, o := range tc.objs {
				objs = append(objs, o.build(t, dir))
			}
			got, err := checkLinkPolicy(objs, tc.link, timer)
			if err != nil || got != tc.want {
				t.Errorf("checkLinkPolicy(%s, %q) = %q, %v; want %q, nil", tc.name, tc.link, got, err, tc.want)
			}
		})
	}
}

// TestLinkPolicyOtherMachine refuses an object for another machine (a
// 32-bit object where cc can build one).
func TestLinkPolicyOtherMachine(t *testing.T) {
	timer := testTimer(t)
	if timer.machine != elf.EM_X86_64 {
		t.Skipf("the timer is %s; this test builds an i386 object", timer.machine)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "kernel.c")
	os.WriteFile(src, []byte(bareKernel), 0o644)
	file := filepath.Join(dir, "kernel.o")
	if out, err := exec.Command("cc", "-m32", "-c", "-o", file, src).CombinedOutput(); err != nil {
		t.Skipf("cc -m32 cannot build here: %s", out)
	}
	got, err := checkLinkPolicy([]policyObject{{Path: "kernel.o", File: file}}, nil, timer)
	want := "link_policy: kernel.o: want an ELF relocatable object (ET_REL), got ET_REL for EM_386 ELFCLASS32 (the timer is EM_X86_64 ELFCLASS64)"
	if err != nil || got != want {
		t.Errorf("checkLinkPolicy(i386 object) = %q, %v; want %q, nil", got, err, want)
	}
}

// TestLinkPolicyTruncated refuses an object cut short as a result, not an
// error or a panic.
func TestLinkPolicyTruncated(t *testing.T) {
	timer := testTimer(t)
	dir := t.TempDir()
	whole := obj("whole.o", honestKernel).build(t, dir)
	b, err := os.ReadFile(whole.File)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{4, 20, 64, len(b) / 2, len(b) - 1} {
		file := filepath.Join(dir, "cut.o")
		os.Remove(file)
		if err := os.WriteFile(file, b[:n], 0o444); err != nil {
			t.Fatal(err)
		}
		got, err := checkLinkPolicy([]policyObject{{Path: "kernel.o", File: file}}, nil, timer)
		want := "link_policy: kernel.o: "
		if err != nil || !strings.HasPrefix(got, want) {
			t.Errorf("checkLinkPolicy(first %d of %d bytes) = %q, %v; want a reason starting %q", n, len(b), got, err, want)
		}
	}
}

// TestLinkPolicyTimerSymbols checks where the forbidden names come from, and that
// the one name the harness leaves to the route is not among them.
func TestLinkPolicyTimerSymbols(t *testing.T) {
	timer := testTimer(t)
	for name, want := range map[string]string{
		"main":           "harness.o defines",
		"clock_gettime":  "harness.o references",
		"memcpy":         "harness.o references",
		"write":          "harness.o references",
		"expf":           "libm.so.6 exports",
		"pthread_create": "libc.so.6 exports",
	} {
		if got := timer.from[name]; got != want {
			t.Errorf("timer.from[%q] = %q, want %q", name, got, want)
		}
	}
	if from, ok := timer.from[harnessEntry]; ok {
		t.Errorf("timer.from[%q] = %q, want absent: routes define the entry", harnessEntry, from)
	}
}
