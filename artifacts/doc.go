// Package artifacts is tilepipe's store: content-addressed stage
// directories, their documents and their receipts. Stages meet only here.
//
// # Store
//
// A [Store] is one stage directory laid out as an OCI image layout
// (docs/format.md). [Store.NewWriter] streams a blob to disk while hashing
// it; [Writer.Commit] fsyncs, re-hashes the bytes on disk, renames the blob
// to blobs/sha256/<hex> and makes it read-only. index.json, written by
// [Store.Commit], is the commit point: a directory without it is an
// incomplete stage that [Open] refuses.
//
// # Stage
//
// [OpenStage] opens a committed stage and re-hashes its manifest, receipt
// and every layer before returning; its callback records when each blob was
// verified, which becomes the next receipt's resolved dependencies. A
// mismatch is a [*MismatchError] (errors.Is [ErrDigestMismatch]) naming the
// blob's title, expected and actual digest; a missing blob wraps
// [ErrNotFound].
//
// # Receipt
//
// Each stage ends with [Store.Finish]: the stage document (tilepipe.json)
// and every blob become titled layers, and an in-toto [Statement] whose
// predicate is a [Receipt] (stage, tool, parameters, consumed digests,
// environment [Fingerprint], commands) becomes the manifest's config. The
// manifest's subject is the previous stage's manifest.
//
// # Documents
//
// [CaptureDoc], [PreparedDoc] and [ReplayDoc] are the stage documents;
// tensors are referenced by [TensorRef] and stored as Arrow files
// (package artifacts/tensor), timing samples as an Arrow table (package
// artifacts/samples).
package artifacts
