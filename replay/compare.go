package replay

import (
	"fmt"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/floors"
)

// Compare recomputes a finished replay's summaries against another
// baseline route from the samples it stored, without timing anything: a
// reviewer can ask "orc against halide" of a run made against torch-eager.
// Both stages are verified (every blob re-hashed) and the replay must have
// been made from that prepared stage. The returned document is the
// replay's, with Config.Baseline and Summary replaced; it is not stored.
func Compare(preparedDir, replayDir, baseline string) (artifacts.ReplayDoc, error) {
	var doc artifacts.ReplayDoc
	var pdoc artifacts.PreparedDoc
	prep, err := artifacts.ReadStage(preparedDir, &pdoc, nil)
	if err != nil {
		return doc, err
	}
	rep, err := artifacts.ReadStage(replayDir, &doc, nil)
	if err != nil {
		return doc, err
	}
	if doc.Prepared != prep.Descriptor.Digest {
		return doc, fmt.Errorf("replay %s: made from prepared %s, but %s is %s", replayDir, doc.Prepared, preparedDir, prep.Descriptor.Digest)
	}
	if !slices.Contains(doc.Routes, baseline) {
		return doc, fmt.Errorf("--baseline %q: not a route of replay %s (routes: %v)", baseline, replayDir, doc.Routes)
	}
	if !rep.Has(doc.Samples) {
		return doc, fmt.Errorf("replay %s: samples %s is not a layer of the replay manifest", replayDir, artifacts.Short(doc.Samples))
	}
	rows, err := samples.ReadFile(rep.Store.Path(doc.Samples), nil)
	if err != nil {
		return doc, fmt.Errorf("replay %s: samples.arrow: %w", replayDir, err)
	}
	doc.Config.Baseline = baseline
	doc.Summary = Summaries(doc.Cases, doc.Routes, pdoc.Entries, doc.Visits, rows, doc.Config, floors.OfSessions(doc.Sessions))
	return doc, nil
}
