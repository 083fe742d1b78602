package budget

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Next is where each threshold stands after measuring the figures at now,
// given where they stood (status.alerts). The result has one entry per
// threshold that has ever fired, in the spec's order; thresholds gone from
// the spec are dropped.
//
//   - never fired, or Armed, and crossed: Pending, one more crossing, with the
//     figures it measured. Raising it (Event, metric, webhook) is the
//     caller's, once this state is stored.
//   - Pending: unchanged until the caller has raised it.
//   - Fired and back on the safe side: Armed. A limit threshold whose
//     window is no longer the one it fired in is Armed too: a new day or
//     month starts from nothing, and crossing it again is a new crossing.
//   - otherwise unchanged: a threshold fires once per crossing, however
//     often it is measured past it.
func Next(ts []Threshold, prev []v1.AlertStatus, f Figures, now time.Time) []v1.AlertStatus {
	var out []v1.AlertStatus
	for _, t := range ts {
		st, seen := find(prev, t.ID())
		r := t.Read(f)
		if seen && st.State == v1.AlertFired && (!r.Crossed || newWindow(t, st, r)) {
			st.State = v1.AlertArmed
		}
		if r.Crossed && (!seen || st.State == v1.AlertArmed) {
			st = crossing(t, st, r, now)
			seen = true
		}
		if seen {
			out = append(out, st)
		}
	}
	return out
}

// crossing is the state of a threshold just crossed. The delivery of the
// previous crossing's webhook, if still retrying, gives way to this one's.
func crossing(t Threshold, prev v1.AlertStatus, r Reading, now time.Time) v1.AlertStatus {
	st := v1.AlertStatus{
		Threshold: t.ID(),
		State:     v1.AlertPending,
		Crossings: prev.Crossings + 1,
		CrossedAt: metav1.NewTime(now.Truncate(time.Second)),
		Quota:     int64(r.Quota),
		OfQuota:   int64(r.Of),
	}
	if t.OnLimit() {
		start := metav1.NewTime(r.WindowStart)
		st.WindowStart = &start
	}
	return st
}

// newWindow reports whether a limit threshold is measured in another window
// than the one it fired in.
func newWindow(t Threshold, st v1.AlertStatus, r Reading) bool {
	return t.OnLimit() && st.WindowStart != nil && !st.WindowStart.Time.Equal(r.WindowStart)
}

func find(sts []v1.AlertStatus, id string) (v1.AlertStatus, bool) {
	for _, st := range sts {
		if st.Threshold == id {
			return *st.DeepCopy(), true
		}
	}
	return v1.AlertStatus{}, false
}

// Find returns the threshold status.alerts names by id.
func Find(ts []Threshold, id string) (Threshold, bool) {
	for _, t := range ts {
		if t.ID() == id {
			return t, true
		}
	}
	return Threshold{}, false
}

// DayStart and MonthStart are the UTC windows of a key's limits at now, as
// the ledger counts them.
func DayStart(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// MonthStart is the start of now's UTC calendar month.
func MonthStart(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}
