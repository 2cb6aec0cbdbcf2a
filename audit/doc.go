// Package audit re-verifies a capture, prepared and replay chain, trusting
// nothing it did not recompute.
//
// # Check
//
// Each [Check] is PASSED, WARNED or FAILED with evidence: blobs (every byte
// re-hashed; the store refuses descriptors that do not describe their
// blobs and blobs no descriptor lists), pin (the replay manifest is the
// one given with --expect; only with it), chain (manifest subjects,
// document links, receipt subjects, consumed digests), cohort (cohort.json
// parsed again against the capture's cases), routes (each route entry
// against its stored describe answer), inputs (regenerated from generator
// and seed), oracle (FP64 reference and bound recomputed bit for bit),
// outputs (every stored output re-checked in full; each visit's
// maxErrRatio recomputed), summaries (recomputed from raw samples),
// records (the configuration in the document, plan.json and the receipt;
// every visit's record against its sample table and the batch samples
// against sampleMs, internal/record), journal (journal.jsonl against the
// document's sessions, visits and closure checks), results table
// (results.md is what the document renders), balance (every planned visit
// once; route positions and immediate precedence), time windows
// (verification before timing, visits inside their round's closure
// checks) and physical floor (times below what the replay machine's
// memory or compute could deliver; its recorded clock, bandwidth and CPU
// flags against this machine's).
//
// Each check family lives in its own file as a function of explicit
// inputs returning its findings (planAgrees, journalAgrees, cohortAgrees,
// routesAgree, resultsAgree, pin, clockAgrees, flagsAgree), so that it is
// tested from hand-made documents.
//
// # Report
//
// A finding is a result, not an error. The [Report] is written as an
// in-toto Statement about the three stage manifests ([MarshalStatement])
// and as markdown ([Markdown]). Its verdict is pass when no check failed.
// It records whether the audit was pinned to a replay manifest received
// out of band ([Config].Expect, [Report.Pin]): without that, a checkpoint
// re-hashed consistently from end to end passes every other check.
package audit
