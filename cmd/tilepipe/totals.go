package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
)

// totalsOrder puts what went well first, then what could not run, then
// failures, so a line reads from good news to bad.
var totalsOrder = []string{
	artifacts.StatusPassed, artifacts.StatusBuilt, artifacts.StatusPrepared,
	artifacts.StatusUnsupported, artifacts.StatusUnavailable, artifacts.StatusFailed,
}

// totals writes a stage's row counts as words, "55 built, 26 unsupported",
// in [totalsOrder], then any other status by name; zero counts are left
// out and no rows at all read "no rows".
func totals(counts map[string]int) string {
	var parts []string
	for _, s := range totalsOrder {
		if n := counts[s]; n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	var other []string
	for s, n := range counts {
		if n != 0 && !slices.Contains(totalsOrder, s) {
			other = append(other, s)
		}
	}
	slices.Sort(other)
	for _, s := range other {
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	if len(parts) == 0 {
		return "no rows"
	}
	return strings.Join(parts, ", ")
}
