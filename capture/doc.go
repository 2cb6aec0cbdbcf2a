// Package capture builds every case of a cohort with each route and stores
// what it needs and what the routes made.
//
// # Packet
//
// For each case capture generates the inputs ([oracle.Generate]), the FP64
// expected outputs and per-element bounds ([oracle.Reference]) and stores
// each as an Arrow tensor: the packet. Routes never choose inputs.
//
// # Route
//
// A route is a program speaking docs/protocol.md: built-in ones live under
// [RoutesDir], third-party ones come from --route-exec. Capture stores the
// route program and its describe answer, writes the case file, runs build in
// a fresh work directory, and stores every file the route lists. A route's
// failure, an unsupported op or an unavailable route is a [artifacts.Build]
// row with its reason, never dropped.
//
// # Validation and external IR
//
// A route that validates (describe's "validates") also gets the case's
// inputs as raw files and returns the outputs its build computed; capture
// checks them against the oracle and records an [artifacts.Validation].
// A route that accepts IR gets the --ir and --abi files, stored under
// external/ and recorded as [artifacts.External].
package capture
