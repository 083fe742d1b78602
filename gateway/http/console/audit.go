package console

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// maxAudit bounds the audit page: the newest actions.
const maxAudit = 200

type auditRow struct {
	At                    int64
	order                 int64 // EventTime in nanoseconds, else At in seconds
	Actor, Action, Detail string
	Key                   string
}

// audit lists the console's recent actions in the tenant's namespace, from
// the Events record writes (source component EventSource). Events are read
// from the API server, not the cache: the gateway watches no Events, and
// the API server keeps them for its event TTL (one hour by default).
func (c *Console) audit(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
	list := &corev1.EventList{}
	if err := c.d.Live.List(r.Context(), list, client.InNamespace(t.Namespace)); err != nil {
		c.fail(w, r, "audit", t, err, "The audit trail cannot be read right now.")
		return
	}
	rows := []auditRow{}
	for i := range list.Items {
		ev := &list.Items[i]
		if ev.Source.Component != EventSource || ev.InvolvedObject.Kind != "ApiToken" {
			continue
		}
		row := auditRow{At: ev.LastTimestamp.Unix(), order: ev.LastTimestamp.UnixNano(), Actor: ev.Annotations[LastActorAnnotation],
			Action: ev.Action, Detail: ev.Message, Key: ev.InvolvedObject.Name}
		if !ev.EventTime.IsZero() {
			row.order = ev.EventTime.UnixNano()
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b auditRow) int { return cmp.Or(cmp.Compare(b.order, a.order), cmp.Compare(a.Key, b.Key)) })
	if len(rows) > maxAudit {
		rows = rows[:maxAudit]
	}
	c.render(w, r, http.StatusOK, "audit", view{Title: "Audit", Page: "audit", Tenant: t, Data: rows})
}

func logError(ctx context.Context, msg string, err error) {
	slog.ErrorContext(ctx, msg, "error", err)
}
