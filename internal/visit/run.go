package visit

import "context"

// Run is what one whole visit reported and how it ended.
type Run struct {
	Validated Report
	Final     *Report // nil when no final report came
	Samples   []Sample
	Calls     int64  // calls per batch sample
	Reason    string // the first failure: a failed report's reason or a [*Failure]'s; "" when it passed
	Out       *Outcome
}

// Sampler takes a visit's samples, as [Session.Drive] does.
type Sampler func(*Session) ([]Sample, int64, error)

// RunAll drives one whole visit of spec: the validated report, then, when
// validation passed, take's samples and the final report, then the end of
// the visit's processes ([Session.Close]). Tests and tools that drive a
// timer directly use it; replay checks more between the steps. The error
// is for "could not run".
func RunAll(ctx context.Context, spec Spec, take Sampler) (*Run, error) {
	sess, err := Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	r := &Run{}
	err = func() error {
		var err error
		if r.Validated, err = sess.Validated(); err != nil {
			return err
		}
		if r.Validated.Status != "ok" {
			r.Reason = r.Validated.Reason
			return nil
		}
		if r.Samples, r.Calls, err = take(sess); err != nil {
			return err
		}
		fin, err := sess.End()
		if err != nil {
			return err
		}
		r.Final, r.Reason = &fin, fin.Reason
		return nil
	}()
	done := err == nil && (r.Final != nil || r.Validated.Status == "failed")
	reason, out, err := sess.Close(err, done)
	if reason != "" {
		r.Reason = reason
	}
	r.Out = out
	return r, err
}
