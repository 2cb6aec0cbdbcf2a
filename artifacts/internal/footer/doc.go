// Package footer checks the footer of an Arrow IPC file before Arrow's Go
// reader decodes it.
//
// # Why
//
// The footer is an unverified flatbuffer. arrow-go's reader sizes slices
// from vector lengths stored in it (schema fields, field children, custom
// metadata) before reading them, so a file of a few hundred bytes can claim
// billions of fields and kill the process with one allocation (found by
// tensor.FuzzReadTensor). [Check] walks exactly those vectors with the
// reader's own offset arithmetic and refuses a length that cannot fit in
// the footer, and a schema with more than [MaxFields] fields in all.
package footer
