//go:build !cgo

package oracle

// cgoBuild: this test binary's dgemm is gonum's.
const cgoBuild = false
