package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelgate/modelgate/gateway/billing"
)

// UsageQuotas returns the quota of the usage rows present among
// requestIDs, by request ID. The Batch controller asks it before running a
// line whose result it has not recorded: a line whose row is present was
// run (and billed) by an earlier run that stopped before recording it.
func (s *Store) UsageQuotas(ctx context.Context, requestIDs []string) (map[string]billing.Quota, error) {
	out := make(map[string]billing.Quota, len(requestIDs))
	for lo := 0; lo < len(requestIDs); lo += 500 {
		chunk := requestIDs[lo:min(lo+500, len(requestIDs))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := `SELECT request_id, quota FROM usage_logs WHERE request_id IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		rows, err := s.db.QueryContext(ctx, s.q(q), args...)
		if err != nil {
			return nil, fmt.Errorf("usage rows by request ID: %w", err)
		}
		for rows.Next() {
			var id string
			var quota int64
			if err := rows.Scan(&id, &quota); err != nil {
				_ = rows.Close()
				return nil, err
			}
			out[id] = billing.Quota(quota)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
