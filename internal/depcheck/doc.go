// Package depcheck holds no code: its test enforces tilepipe's dependency
// directions (STYLE.md, "Layout and dependency direction").
//
// # Rules
//
// A stage is one of capture, prepare, replay and audit, with its
// sub-packages. Stages never import each other; they meet only through the
// store, package artifacts. Only cmd/tilepipe strings stages together, so
// no other package imports a stage. oracle is a leaf: the standard library
// and gonum only (and, through cgo's "C", OpenBLAS for its dgemm). artifacts (and its sub-packages) import no stage and nothing from
// internal/: the store is the floor the stages stand on.
//
// The binary links none of the modules listed in heavy (gRPC, protobuf,
// Arrow Flight and their kin): they came in once through arrow-go's pqarrow
// and weighed 4 MB of the static binary the GPU machine receives.
//
// Only non-test imports count: tests may reach across to build fixtures.
package depcheck
