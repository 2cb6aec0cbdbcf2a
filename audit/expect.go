package audit

import "fmt"

// pin compares the replay manifest the audit verified (got; "" when the
// replay stage did not verify) with the one the reviewer received out of
// band (want, --expect). Every digest inside a checkpoint can be re-hashed
// consistently by whoever holds it; only a digest that travelled another
// way tells such a checkpoint from the one that was sent.
func pin(want, got string) []string {
	switch {
	case got == "":
		return []string{fmt.Sprintf("the replay stage did not verify, so its manifest cannot be compared with the expected %s", want)}
	case got != want:
		return []string{fmt.Sprintf("replay manifest %s, expected %s (--expect): this is not the checkpoint that was sent", got, want)}
	}
	return nil
}

// NotPinned says what an audit without --expect cannot tell.
const NotPinned = "not pinned: a consistent re-hash of the whole checkpoint cannot be told apart without --expect"

// Pin says whether the audit was pinned to a replay manifest received out
// of band: "pinned to sha256:..." or [NotPinned].
func (r *Report) Pin() string {
	if !r.Pinned {
		return NotPinned
	}
	return "pinned to " + r.Expected
}
