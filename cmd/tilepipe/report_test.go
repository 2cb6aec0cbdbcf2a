package main

import (
	"bytes"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/internal/testroute"
)

// chromium finds Debian's chromium, or skips the test where it is not
// installed, unless make test asks for every part
// (TILEPIPE_REQUIRE_ROUTES=1: make deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
			t.Fatalf("chromium not found, and TILEPIPE_REQUIRE_ROUTES=1 (make deps installs Debian's chromium): %v", err)
		}
		t.Skipf("chromium not found: %v", err)
	}
	return p
}

// headless runs chromium headless on a local file with the flags this
// closed network needs (no background connections, a new profile).
func headless(t *testing.T, bin, file string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,4000"}
	cmd := exec.Command(bin, append(append(base, args...), "file://"+file)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// TestReportInChromium: run writes report.html, one self-contained page
// (no script, nothing fetched); headless Chromium renders it to a
// screenshot that is not blank and has the plots' colors, and the DOM it
// built has one results row per (case, route) of the replay, in order,
// and a plot per case, the ratios and the timeline.
func TestReportInChromium(t *testing.T) {
	long(t)
	bin := chromium(t)
	second := secondNaive(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16+", "+add3x7), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", second, "--baseline", "naive", "--rounds", "6", "--allow-load", "--output", dir}, fast...) // every round paired, however busy the machine: a fresh-clone CI run lost all 6 to load and drew no ratio plot
	if code, out, errs := tp(t, args...); code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	page := filepath.Join(dir, "report.html")
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", `src="http`, `href="http`, "url(http", "@import"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("report.html has %q: the page must need nothing from a network", bad)
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	headless(t, bin, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	colors, inked := map[[3]uint32]bool{}, 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			if r>>8 < 240 || g>>8 < 240 || bl>>8 < 240 {
				inked++
			}
		}
	}
	if total := bounds.Dx() * bounds.Dy() / 4; inked < total/100 || len(colors) < 20 {
		t.Errorf("screenshot %dx%d: %d of %d sampled pixels inked, %d colors; want a page with text and plots", bounds.Dx(), bounds.Dy(), inked, total, len(colors))
	}

	dom := string(headless(t, bin, page, "--dump-dom"))
	var got []string
	for _, m := range regexp.MustCompile(`<tr data-case="([^"]*)" data-route="([^"]*)">`).FindAllStringSubmatch(dom, -1) {
		got = append(got, m[1]+"/"+m[2])
	}
	var want []string
	for _, s := range readReplay(t, filepath.Join(dir, "replay")).Summary {
		want = append(want, s.Case+"/"+s.Route)
	}
	if !slices.Equal(got, want) {
		t.Errorf("results rows in the rendered DOM %v, want the replay's %v", got, want)
	}
	for _, id := range []string{`id="verdict" class="pass"`, `id="ratios"`, `id="timeline"`, `class="plot" data-case="gemm-16x16x16"`, `class="plot" data-case="add-3x7"`} {
		if !strings.Contains(dom, id) {
			t.Errorf("rendered DOM lacks %s", id)
		}
	}
	if n := strings.Count(dom, "<svg"); n < 4 {
		t.Errorf("rendered DOM has %d SVG plots, want 4 (two cases, the ratios, the timeline)", n)
	}
}
