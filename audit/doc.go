// Package audit re-verifies a capture, prepared and replay chain, trusting
// nothing it did not recompute.
//
// # Check
//
// Each [Check] is PASSED, WARNED or FAILED with evidence: blobs (every byte
// re-hashed), chain (manifest subjects, document links, receipt subjects,
// consumed digests), inputs (regenerated from generator and seed), oracle
// (FP64 reference and bound recomputed bit for bit), outputs (every stored
// output re-checked in full), summaries (recomputed from raw samples),
// balance (every planned visit once; route positions and immediate
// precedence), time windows (verification before timing, visits inside
// their round's closure checks) and physical floor (times below what this
// machine's memory or compute could deliver).
//
// # Report
//
// A finding is a result, not an error. The [Report] is written as an
// in-toto Statement about the three stage manifests ([MarshalStatement])
// and as markdown ([Markdown]). Its verdict is pass when no check failed.
package audit
