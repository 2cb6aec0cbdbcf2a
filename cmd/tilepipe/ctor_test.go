package main

import (
	"debug/elf"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// TestConstructorsDeferred: an object with a constructor is prepared,
// not refused, and its constructor is out of the linked timer's startup
// array: the timer's .init_array is as large as an honest object's timer
// has, and the route's pointer sits in tilepipe_init, which the timer
// calls just before the first call (harness.c, route_init). The prepare
// receipt records the objcopy that moved it. (The ctor adversary shows
// what its thread meets at replay: TestAdversaries.)
func TestConstructorsDeferred(t *testing.T) {
	initArrays := map[string][2]uint64{}
	for _, adv := range []string{"none", "ctor"} {
		t.Setenv("TILEPIPE_TEST_ADVERSARY", adv)
		dir := t.TempDir()
		capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
		if code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t), "--output", capDir); code != exitOK {
			t.Fatalf("%s: capture = exit %d: %s", adv, code, errs)
		}
		if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != exitOK {
			t.Fatalf("%s: prepare = exit %d: %s", adv, code, errs)
		}
		st := openStage(t, prepDir, artifacts.PreparedType)
		e := readPrepared(t, prepDir).Entries[0]
		if e.Status != artifacts.StatusPrepared || e.Program == nil {
			t.Fatalf("%s: entry %s %q, want prepared", adv, e.Status, e.Reason)
		}
		f, err := elf.Open(st.Store.Path(e.Program.Digest))
		if err != nil {
			t.Fatal(err)
		}
		var sizes [2]uint64
		for i, name := range []string{".init_array", "tilepipe_init"} {
			if s := f.Section(name); s != nil {
				sizes[i] = s.Size
			}
		}
		f.Close()
		initArrays[adv] = sizes
		rec, err := st.Receipt()
		if err != nil {
			t.Fatal(err)
		}
		moved := slices.ContainsFunc(rec.Predicate.Commands, func(c artifacts.Command) bool {
			return slices.Contains(c.Argv, ".init_array=tilepipe_init")
		})
		if moved != (adv == "ctor") {
			t.Errorf("%s: the receipt records objcopy --rename-section: %v, want %v", adv, moved, adv == "ctor")
		}
	}
	if none, ctor := initArrays["none"], initArrays["ctor"]; ctor[0] != none[0] || none[1] != 0 || ctor[1] != 8 {
		t.Errorf("(.init_array, tilepipe_init) bytes: honest %v, with a constructor %v; want the same .init_array and one pointer in tilepipe_init", none, ctor)
	}
}
