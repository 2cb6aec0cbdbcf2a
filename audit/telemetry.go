package audit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/oracle"
)

// idleProbes judges a passed visit's idle probes (artifacts.GPUIdle) for
// its rows sample rows, staged of them novel samples whose slots replay's
// monitor staged (novel rule 3): every probe within telemetry.BusyNs (a
// slower one fails the visit in replay, gpu_busy), and at least two a
// sample (one before its command, one after its report; warm-up and
// calibration commands add more) and one more a staged sample (at the end
// of its span). "" when they pass, or when the visit has none (the CPU,
// or a replay made before the probe).
func idleProbes(g *artifacts.GPUIdle, rows, staged int) string {
	switch {
	case g == nil:
		return ""
	case g.WorstNs > telemetry.BusyNs:
		return fmt.Sprintf("idle probe of %d us, above %d us: the GPU ran work of the visit outside its samples, and the visit passed", g.WorstNs/1000, telemetry.BusyNs/1000)
	case g.Probes < 2*rows+staged && staged > 0:
		return fmt.Sprintf("%d idle probes for %d samples, %d of them staged: want one before and one after every sample, and one at the end of every staged sample's span", g.Probes, rows, staged)
	case g.Probes < 2*rows:
		return fmt.Sprintf("%d idle probes for %d samples: want one before and one after every sample", g.Probes, rows)
	case g.Probes > 0 && g.WorstNs <= 0:
		return fmt.Sprintf("%d idle probes, the slowest %d ns: want each probe's time", g.Probes, g.WorstNs)
	}
	return ""
}

// telemetryCheck checks that every sample of a passed GPU visit carries the
// GPU's readings from before and after it (and no CPU sample does), and
// names every sample they flag (docs/gpu.md, "Telemetry"): a warning per
// visit, and a mark on its row (the finding's marks). The flags themselves were re-derived from
// the readings when each table was read (samples.ReadFile).
func telemetryCheck(cp *checkpoint, f *facts) finding {
	var p, w []string
	marks := map[artifacts.Pair]map[string]int{}
	visits, vrows, _ := f.passedRows() // unreadable tables fail in summaries
	gpu, flagged, implausible, probed := 0, 0, 0, 0
	rule, _ := sets.RuleOf(cp.rdoc.Config.NovelRule) // an unknown rule is the records check's problem
	for i, v := range visits {
		cuda := cp.device(v.Case) == oracle.DeviceCUDA
		if cuda {
			gpu++
		}
		staged := 0
		if rule.Staged(cp.device(v.Case)) {
			staged = countKind(vrows[i], samples.KindNovel)
		}
		if why := idleProbes(v.GPUIdle, len(vrows[i]), staged); why != "" {
			p = append(p, fmt.Sprintf("visit %d (%s %s): %s", v.Index, v.Case, v.Route, why))
		}
		if cuda && v.GPUIdle != nil {
			probed++
		}
		byFlag := map[string][]string{}
		unread := 0
		for _, r := range vrows[i] {
			if r.Telemetry != "" && (r.Before.Implausible() != "" || r.After.Implausible() != "") {
				unread++
			}
			switch {
			case cuda && r.Telemetry != samples.TelemetryNVML:
				p = append(p, fmt.Sprintf("visit %d (%s %s): GPU sample %s %d has no telemetry", v.Index, v.Case, v.Route, r.Kind, r.Index))
			case !cuda && r.Telemetry != "":
				p = append(p, fmt.Sprintf("visit %d (%s %s): CPU sample %s %d has GPU telemetry %q", v.Index, v.Case, v.Route, r.Kind, r.Index, r.Telemetry))
			}
			if r.Flags == "" {
				continue
			}
			flagged++
			for _, f := range strings.Split(r.Flags, ",") {
				byFlag[f] = append(byFlag[f], fmt.Sprintf("%s %d", r.Kind, r.Index))
			}
		}
		k := v.Pair()
		if unread > 0 {
			implausible += unread
			w = append(w, fmt.Sprintf("visit %d (%s %s, round %d): %d samples' readings cannot describe a powered GPU (%s): the telemetry says nothing of them", v.Index, v.Case, v.Route, v.Round+1, unread, firstImplausible(vrows[i])))
			if marks[k] == nil {
				marks[k] = map[string]int{}
			}
			marks[k][MarkTelemetryUnread] += unread
		}
		if len(byFlag) == 0 {
			continue
		}
		if marks[k] == nil {
			marks[k] = map[string]int{}
		}
		var parts []string
		for _, f := range sortedKeys(byFlag) {
			marks[k][f] += len(byFlag[f])
			parts = append(parts, fmt.Sprintf("%s in %d (%s)", f, len(byFlag[f]), strings.Join(byFlag[f], ", ")))
		}
		w = append(w, fmt.Sprintf("visit %d (%s %s, round %d): %s", v.Index, v.Case, v.Route, v.Round+1, strings.Join(parts, "; ")))
	}
	out := map[artifacts.Pair][]string{}
	for k, m := range marks {
		for _, f := range sortedKeys(m) {
			out[k] = append(out[k], fmt.Sprintf("%s: %d samples", f, m[f]))
		}
	}
	fd := finding{problems: p, warnings: w, summary: fmt.Sprintf("GPU readings around every sample of %d passed GPU visits; %d samples flagged (power, heat or another process); %d with readings of no powered GPU; %d of them probed idle around every sample (replays made before the probe have none)", gpu, flagged, implausible, probed)}
	fd.marks = out
	return fd
}

// MarkTelemetryUnread marks a row some of whose samples' readings cannot
// describe a powered GPU (samples.Reading.Implausible): nothing is known of
// the GPU's state during them.
const MarkTelemetryUnread = "telemetry unread"

func firstImplausible(rows []samples.Row) string {
	for _, r := range rows {
		for _, rd := range []samples.Reading{r.Before, r.After} {
			if why := rd.Implausible(); r.Telemetry != "" && why != "" {
				return why
			}
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
