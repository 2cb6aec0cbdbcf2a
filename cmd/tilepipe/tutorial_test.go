package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tutorialCommands is the shell block between the markers
// <!-- tutorial-NAME: begin --> and <!-- tutorial-NAME: end --> of
// docs/tutorial.md, without its fence lines.
func tutorialCommands(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- tutorial-"+name+": begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- tutorial-"+name+": end -->")
	if !ok || !ok2 {
		t.Fatalf("docs/tutorial.md: no tutorial-%s markers", name)
	}
	block = strings.TrimSpace(block)
	if !strings.HasPrefix(block, "```sh\n") || !strings.HasSuffix(block, "\n```") {
		t.Fatalf("docs/tutorial.md: tutorial-%s holds more than one sh block:\n%s", name, block)
	}
	return strings.TrimSuffix(strings.TrimPrefix(block, "```sh\n"), "\n```")
}

// TestTutorialCPU runs the CPU tutorial's commands exactly as
// docs/tutorial.md writes them, with bin on PATH, from a directory that
// holds the repository's examples, as a new user would from the
// repository's root; then checks what the page says they make.
func TestTutorialCPU(t *testing.T) {
	long(t)
	needRoutes(t, "kernel-c", "torch-eager")
	cmds := tutorialCommands(t, "cpu")
	work, bin := t.TempDir(), t.TempDir()
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{examples, filepath.Join(work, "examples")}, {tilepipeBinary(t), filepath.Join(bin, "tilepipe")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", cmds)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tutorial's commands failed: %v\n%s\n%s", err, cmds, out)
	}
	for _, want := range []string{
		"mine ", // tilepipe routes lists the kernel's route
		"| add-256x1024 | mine | passed |",
		"| add-37x1001 | mine | passed |",
		"audit verdict: PASS (checkpoint intact;",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tutorial's output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"runs/tutorial/results.md", "runs/tutorial/review.json", "runs/tutorial/report.html", "runs/tutorial/capture"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("the tutorial made no %s: %v", f, err)
		}
	}
}
