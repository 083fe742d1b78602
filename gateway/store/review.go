package store

import (
	"context"
	"fmt"
	"time"
)

// Review asset states.
const (
	ReviewPending  = "pending"
	ReviewPassed   = "passed"
	ReviewRejected = "rejected"
)

// ReviewAsset is the reusable private-asset-review record of one asset for
// one tenant (UserID) on one channel. Key is the asset's full URL, or
// "sha256:<hex>" of decoded inline content.
type ReviewAsset struct {
	UserID  int64
	Channel string
	Type    string
	Key     string
	// State is pending, passed or rejected.
	State string
	// BlobKey is where the gateway stored inline content ("" for URLs).
	BlobKey string
	// UpstreamRef is the channel library's reference of the asset (Ark's
	// "asset://<id>"), "" while it has none or for a channel without one.
	UpstreamRef string
	// PreparedAt is when the current preparation started; DecidedAt when
	// it ended (zero while pending); LastUsedAt when a task last needed it.
	PreparedAt time.Time
	DecidedAt  time.Time
	LastUsedAt time.Time
}

const reviewColumns = `user_id, channel, asset_type, asset_key, state, blob_key, prepared_at, decided_at, last_used_at, upstream_ref`

// PrepareReviewAsset returns the record a task's review round uses for an
// asset, and marks it used at now. An existing passed or pending record is
// shared (one preparation serves every concurrent request); a missing one
// starts a preparation; a rejected one starts a new preparation (the asset
// may have been re-reviewed or the channel's policy changed), forgetting
// the library reference the rejection was about. One statement,
// so concurrent callers can never start two preparations.
func (s *Store) PrepareReviewAsset(ctx context.Context, a ReviewAsset, now time.Time) (ReviewAsset, error) {
	if a.UserID == 0 || a.Channel == "" || a.Type == "" || a.Key == "" {
		return ReviewAsset{}, fmt.Errorf("prepare review asset: user, channel, type and key are required")
	}
	ms := now.UnixMilli()
	row := s.db.QueryRowContext(ctx, s.q(`
		INSERT INTO review_assets (`+reviewColumns+`) VALUES (?, ?, ?, ?, 'pending', ?, ?, 0, ?, '')
		ON CONFLICT (user_id, channel, asset_type, asset_key) DO UPDATE SET
			last_used_at = excluded.last_used_at,
			upstream_ref = CASE WHEN review_assets.state = 'rejected' THEN '' ELSE review_assets.upstream_ref END,
			blob_key     = CASE WHEN excluded.blob_key <> '' THEN excluded.blob_key ELSE review_assets.blob_key END,
			prepared_at  = CASE WHEN review_assets.state = 'rejected' THEN excluded.prepared_at ELSE review_assets.prepared_at END,
			decided_at   = CASE WHEN review_assets.state = 'rejected' THEN 0 ELSE review_assets.decided_at END,
			state        = CASE WHEN review_assets.state = 'rejected' THEN 'pending' ELSE review_assets.state END
		RETURNING `+reviewColumns),
		a.UserID, a.Channel, a.Type, a.Key, a.BlobKey, ms, ms)
	out, err := scanReviewAsset(row)
	if err != nil {
		return ReviewAsset{}, fmt.Errorf("prepare review asset: %w", err)
	}
	return out, nil
}

// RecordReviewRef records the library reference of a pending
// preparation that has none yet and returns the record as stored: when
// two tasks sharing the preparation both had the asset created, the first
// reference recorded is the one every task uses.
func (s *Store) RecordReviewRef(ctx context.Context, a ReviewAsset, ref string) (ReviewAsset, error) {
	if ref == "" {
		return ReviewAsset{}, fmt.Errorf("record review reference: the reference is empty")
	}
	if _, err := s.db.ExecContext(ctx, s.q(`
		UPDATE review_assets SET upstream_ref = ?
		WHERE user_id = ? AND channel = ? AND asset_type = ? AND asset_key = ? AND state = 'pending' AND upstream_ref = ''`),
		ref, a.UserID, a.Channel, a.Type, a.Key); err != nil {
		return ReviewAsset{}, fmt.Errorf("record review reference: %w", err)
	}
	out, err := s.reviewAsset(ctx, a)
	if err != nil {
		return ReviewAsset{}, fmt.Errorf("record review reference: %w", err)
	}
	return out, nil
}

// DecideReviewAsset records the review service's decision (passed or
// rejected) of a pending preparation, with a.UpstreamRef when it is set
// (else the reference recorded stays); a record decided meanwhile keeps
// its first decision. It returns the record as stored.
func (s *Store) DecideReviewAsset(ctx context.Context, a ReviewAsset, state string, now time.Time) (ReviewAsset, error) {
	if state != ReviewPassed && state != ReviewRejected {
		return ReviewAsset{}, fmt.Errorf("decide review asset: state %q is not passed or rejected", state)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`
		UPDATE review_assets SET state = ?, decided_at = ?,
			upstream_ref = CASE WHEN ? <> '' THEN ? ELSE upstream_ref END
		WHERE user_id = ? AND channel = ? AND asset_type = ? AND asset_key = ? AND state = 'pending'`),
		state, now.UnixMilli(), a.UpstreamRef, a.UpstreamRef, a.UserID, a.Channel, a.Type, a.Key); err != nil {
		return ReviewAsset{}, fmt.Errorf("decide review asset: %w", err)
	}
	out, err := s.reviewAsset(ctx, a)
	if err != nil {
		return ReviewAsset{}, fmt.Errorf("decide review asset: %w", err)
	}
	return out, nil
}

// reviewAsset reads a's record as stored.
func (s *Store) reviewAsset(ctx context.Context, a ReviewAsset) (ReviewAsset, error) {
	row := s.db.QueryRowContext(ctx, s.q(`SELECT `+reviewColumns+` FROM review_assets
		WHERE user_id = ? AND channel = ? AND asset_type = ? AND asset_key = ?`), a.UserID, a.Channel, a.Type, a.Key)
	return scanReviewAsset(row)
}

// UnusedReviewAssets lists at most limit records not used since before,
// the longest unused first (the cleanup job's work list).
func (s *Store) UnusedReviewAssets(ctx context.Context, before time.Time, limit int) ([]ReviewAsset, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT `+reviewColumns+` FROM review_assets
		WHERE last_used_at < ? ORDER BY last_used_at LIMIT ?`), before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("unused review assets: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ReviewAsset
	for rows.Next() {
		a, err := scanReviewAsset(rows)
		if err != nil {
			return nil, fmt.Errorf("unused review assets: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// DeleteReviewAsset removes a record unless it was used again at or after
// before (a task that needs it meanwhile keeps it). deleted reports whether
// it went.
func (s *Store) DeleteReviewAsset(ctx context.Context, a ReviewAsset, before time.Time) (deleted bool, err error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM review_assets
		WHERE user_id = ? AND channel = ? AND asset_type = ? AND asset_key = ? AND last_used_at < ?`),
		a.UserID, a.Channel, a.Type, a.Key, before.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("delete review asset: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func scanReviewAsset(r interface{ Scan(...any) error }) (ReviewAsset, error) {
	var a ReviewAsset
	var prepared, decided, used int64
	if err := r.Scan(&a.UserID, &a.Channel, &a.Type, &a.Key, &a.State, &a.BlobKey, &prepared, &decided, &used, &a.UpstreamRef); err != nil {
		return ReviewAsset{}, err
	}
	a.PreparedAt, a.LastUsedAt = time.UnixMilli(prepared), time.UnixMilli(used)
	if decided > 0 {
		a.DecidedAt = time.UnixMilli(decided)
	}
	return a, nil
}

// ReviewBlobInUse reports whether any record still names the stored copy
// blobKey (records of other channels may share one tenant's copy).
func (s *Store) ReviewBlobInUse(ctx context.Context, blobKey string) (bool, error) {
	var n int64
	if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM review_assets WHERE blob_key = ?`), blobKey).Scan(&n); err != nil {
		return false, fmt.Errorf("review blob in use: %w", err)
	}
	return n > 0, nil
}
