package store

import (
	"context"
	"fmt"

	"github.com/modelgate/modelgate/gateway/billing"
)

// DisableToken is what a deleted ApiToken leaves in the ledger: the token
// reserves nothing more (ErrTokenDisabled), every lease any replica holds on
// it goes back to the token and its tenant, and its usage rows and
// reservations stay (in-flight requests still settle; their rows are then
// charged to the balances directly). It reports the quota the leases held.
// Idempotent; a token the ledger never saw is not an error.
func (s *Store) DisableToken(ctx context.Context, tokenID int64) (billing.Quota, error) {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE tokens SET disabled = ? WHERE token_id = ?`), true, tokenID); err != nil {
		return 0, fmt.Errorf("disable token %d: %w", tokenID, err)
	}
	return s.returnLeasesWhere(ctx, `token_id = ?`, tokenID)
}

// DisableTenantTokens is what a deleted Tenant leaves in the ledger: every
// key of the tenant is disabled and every lease on them returned. The
// tenant's balance, grants and usage rows stay.
func (s *Store) DisableTenantTokens(ctx context.Context, userID int64) (billing.Quota, error) {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE tokens SET disabled = ? WHERE user_id = ?`), true, userID); err != nil {
		return 0, fmt.Errorf("disable the tokens of tenant %d: %w", userID, err)
	}
	return s.returnLeasesWhere(ctx, `user_id = ?`, userID)
}

// ReturnReplicaLeases returns every lease of a replica name, whatever its
// expiry. A gateway calls it at start, once it holds the name's spool lock:
// a lease under its name is then a dead predecessor's (a restarted container
// keeps its pod name), whose in-memory view of the lease died with it.
// Without this the new run would renew that row and leave what the dead run
// held in it out of use until the next clean shutdown.
func (s *Store) ReturnReplicaLeases(ctx context.Context, replicaID string) (billing.Quota, error) {
	return s.returnLeasesWhere(ctx, `replica_id = ?`, replicaID)
}

// returnLeasesWhere releases every lease matching cond, whatever its expiry.
func (s *Store) returnLeasesWhere(ctx context.Context, cond string, arg any) (billing.Quota, error) {
	ids, err := s.leaseIDs(ctx, cond, arg)
	if err != nil {
		return 0, fmt.Errorf("find leases: %w", err)
	}
	var total billing.Quota
	for _, id := range ids {
		returned, _, err := s.releaseLease(ctx, id, false)
		if err != nil {
			return total, err
		}
		total += billing.Quota(returned)
	}
	return total, nil
}

// TokenDisabled reports whether a token was disabled (tests and status).
func (s *Store) TokenDisabled(ctx context.Context, tokenID int64) (bool, error) {
	var d bool
	if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT disabled FROM tokens WHERE token_id = ?`), tokenID).Scan(&d); err != nil {
		return false, fmt.Errorf("token %d: %w", tokenID, err)
	}
	return d, nil
}
