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
// # Shape
//
// The audit is a table of pure checks (check.go). Its first step is
// explicit: openCheckpoint opens the three stages, re-hashing every blob
// (the blobs check), and nothing else is read unless that passed; then the
// pin and the signatures. The facts several checks share are derived once,
// up front: every case's FP64 reference (captureFacts) and the passed
// visits' sample tables (forReplay). Each check family is then a function
// of the checkpoint and the facts returning a finding (problems, warnings,
// a summary, marks on rows), in a file of its own (chain.go, inputs.go,
// oracle.go, outputs.go, summaries.go, records.go, ...); the table,
// checks, lists them in the report's order. A merged replay's audit
// (merged.go) runs the table's perCapture checks once and the others once
// per shard, each shard a checkpoint of its own sharing the capture's
// facts. The narrower helpers beneath them (planAgrees, journalAgrees,
// cohortAgrees, routesAgree, resultsAgree, pin, clockAgrees, flagsAgree,
// checkSummaries) take documents alone, so that they are tested from
// hand-made documents.
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
