// Command benchratio reads `go test -bench` output (stdin) and prints, as
// a markdown table, each of tilepipe's speed targets as the ratio of a
// benchmark to its anchor measured in the same run (make bench; docs/
// results/ keeps the runs): the oracle's gemm reference against two
// OpenBLAS dgemm calls, the elementwise oracle against one goroutine
// moving the same bytes, and the store against cp + sync. Medians over
// -count runs. It exits 1 when an anchor or a benchmark is missing, so a
// renamed benchmark cannot silently drop a target.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// target is one speed target: Bench against Anchor by Unit ("ns/op":
// Bench's time over Anchor's, at most Limit; "MB/s": Bench's rate over
// Anchor's, at least Limit).
type target struct {
	Name, Bench, Anchor, Unit string
	Limit                     float64
}

var targets = []target{
	{"oracle: gemm 4096³ reference + bound vs two OpenBLAS dgemm", "BenchmarkRefGemm/n=4096", "BenchmarkOpenBLASDgemmTwice/n=4096", "ns/op", 2},
	{"oracle: gemm 1024³ reference + bound vs two OpenBLAS dgemm", "BenchmarkRefGemm/n=1024", "BenchmarkOpenBLASDgemmTwice/n=1024", "ns/op", 2},
	{"oracle: add 2^24 reference + bound vs writing its bytes", "BenchmarkAddReference", "BenchmarkMemoryWrite", "MB/s", 0.5},
	{"oracle: add 2^24 compare vs reading its bytes", "BenchmarkAddCompare", "BenchmarkMemoryRead", "MB/s", 0.5},
	{"store: 64 MiB blob vs cp + sync", "BenchmarkPutStream", "BenchmarkCopySync", "MB/s", 0.8},
}

func main() {
	res, err := parse(os.Stdin)
	if err == nil {
		err = table(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

// parse collects every value of every benchmark line by name (the -P
// suffix dropped) and unit.
func parse(r io.Reader) (map[string]map[string][]float64, error) {
	res := map[string]map[string][]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: value %q: %v", sc.Text(), f[i], err)
			}
			if res[name] == nil {
				res[name] = map[string][]float64{}
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	return res, sc.Err()
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func table(w io.Writer, res map[string]map[string][]float64) error {
	fmt.Fprintln(w, "| target | benchmark | anchor | ratio | limit | met |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	var missing []string
	for _, t := range targets {
		b, a := res[t.Bench][t.Unit], res[t.Anchor][t.Unit]
		if len(b) == 0 || len(a) == 0 {
			missing = append(missing, fmt.Sprintf("%s or %s (%s)", t.Bench, t.Anchor, t.Unit))
			continue
		}
		mb, ma := median(b), median(a)
		r := mb / ma
		met, limit := r <= t.Limit, fmt.Sprintf("≤ %g", t.Limit)
		if t.Unit == "MB/s" {
			met, limit = r >= t.Limit, fmt.Sprintf("≥ %g", t.Limit)
		}
		yes := "yes"
		if !met {
			yes = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s %s | %s %s | %.2f | %s | %s |\n", t.Name, fmtV(mb), t.Unit, fmtV(ma), t.Unit, r, limit, yes)
	}
	if len(missing) > 0 {
		return fmt.Errorf("no result for %s", strings.Join(missing, ", "))
	}
	return nil
}

func fmtV(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.3g", v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
