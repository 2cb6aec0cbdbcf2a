package shard

import (
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

func TestParse(t *testing.T) {
	if s, err := Parse("2/5"); err != nil || s != (artifacts.ShardSpec{Index: 2, Count: 5}) {
		t.Errorf("Parse(2/5) = %v, %v", s, err)
	}
	for _, bad := range []string{"5/5", "-1/3", "1", "1/0", "a/3", "1/4097", "1/3/4", ""} {
		if _, err := Parse(bad); err == nil || !strings.HasPrefix(err.Error(), `--shard "`+bad+`": want I/N`) {
			t.Errorf("Parse(%q) = %v, want refused", bad, err)
		}
	}
}

// TestCases: the shards partition the cases, every case in exactly one,
// each shard in capture order; no shards is every case.
func TestCases(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e", "f", "g"}
	var union []string
	for i := range 3 {
		c := Cases(all, artifacts.ShardSpec{Index: i, Count: 3})
		union = append(union, c...)
		if i == 0 && !slices.Equal(c, []string{"a", "d", "g"}) {
			t.Errorf("shard 0/3: %v", c)
		}
	}
	slices.Sort(union)
	if !slices.Equal(union, all) {
		t.Errorf("the shards' cases %v, want each of %v once", union, all)
	}
	if c := Cases(all, artifacts.ShardSpec{}); !slices.Equal(c, all) {
		t.Errorf("no shards: %v", c)
	}
	if err := Check(artifacts.ShardSpec{Index: 0, Count: 8}, 7); err == nil || err.Error() != "--shard 0/8: the capture has 7 cases, and a shard is a set of whole cases: want at most 7 shards" {
		t.Errorf("Check 8 shards of 7 cases = %v", err)
	}
}

// TestCombine renumbers visits, their sessions and sample rows by offset.
func TestCombine(t *testing.T) {
	d0 := artifacts.ReplayDoc{Plan: []artifacts.Visit{{Index: 0, Case: "a"}, {Index: 1, Case: "a"}}, Sessions: []artifacts.Session{{Index: 0}},
		Visits: []artifacts.VisitResult{{Visit: artifacts.Visit{Index: 0, Case: "a"}}, {Visit: artifacts.Visit{Index: 1, Case: "a"}}}}
	d1 := artifacts.ReplayDoc{Plan: []artifacts.Visit{{Index: 0, Case: "b"}}, Sessions: []artifacts.Session{{Index: 0}, {Index: 1}},
		Visits: []artifacts.VisitResult{{Visit: artifacts.Visit{Index: 0, Case: "b"}, Session: 1}}}
	c := Combine([]artifacts.ReplayDoc{d0, d1})
	if len(c.Plan) != 3 || c.Plan[2].Index != 2 || c.Visits[2].Index != 2 || c.Visits[2].Session != 2 || c.Sessions[2].Index != 2 ||
		!slices.Equal(c.VisitOffset, []int{0, 2}) || !slices.Equal(c.SessionOffset, []int{0, 1}) {
		t.Errorf("Combine = %+v", c)
	}
	if r := Rows([]samples.Row{{Visit: 0}, {Visit: 1}}, 5); r[0].Visit != 5 || r[1].Visit != 6 {
		t.Errorf("Rows = %+v", r)
	}
}

// TestDiffer: what makes two machines' times incomparable, named; hosts
// and a clock within 2% are not.
func TestDiffer(t *testing.T) {
	a := Machine{Host: "n1", CPUModel: "EPYC", CPUFlags: []string{"avx2", "fma"}, CPUs: 2, CPUMHz: 2000, GPU: "H200, 580", GPUClocks: "1980 MHz, 3201 MHz"}
	same := a
	same.Host, same.CPUMHz = "n2", 2030
	if d := Differ(a, same); len(d) != 0 {
		t.Errorf("another host, clock 1.5%% higher: %v", d)
	}
	for _, tc := range []struct {
		edit func(*Machine)
		want string
	}{
		{func(m *Machine) { m.CPUModel = "Xeon" }, `CPU model "Xeon", not "EPYC"`},
		{func(m *Machine) { m.CPUFlags = []string{"avx2", "avx512f"} }, "CPU flags: has [avx512f], lacks [fma]"},
		{func(m *Machine) { m.CPUs = 4 }, "4 cpus, not 2"},
		{func(m *Machine) { m.CPUMHz = 2100 }, "CPU clock 2100 MHz, not 2000"},
		{func(m *Machine) { m.GPU = "H100, 580" }, `GPU "H100, 580", not "H200, 580"`},
		{func(m *Machine) { m.GPUClocks = "1755 MHz, 2619 MHz" }, `GPU clocks "1755 MHz, 2619 MHz", not "1980 MHz, 3201 MHz"`},
	} {
		b := a
		tc.edit(&b)
		if d := Differ(a, b); len(d) != 1 || d[0] != tc.want {
			t.Errorf("Differ = %q, want [%q]", d, tc.want)
		}
	}
	b := a
	b.CPUs = 4
	if m := Mixed([]Machine{a, a, b}, []artifacts.ShardSpec{{Index: 0, Count: 3}, {Index: 1, Count: 3}, {Index: 2, Count: 3}}); len(m) != 1 || m[0] != "shard 2/3 on n1: 4 cpus, not 2 (shard 0/3 ran on n1)" {
		t.Errorf("Mixed = %q", m)
	}
}
