-- Private asset review: a channel whose library keeps its own copy of an
-- asset (Volcengine Ark's asset library) names it by a reference
-- ("asset://<id>"). The preparation record keeps it, so that later polls
-- ask about the same library asset and every task reusing the record sends
-- the reference upstream in place of the stored copy.

-- +goose Up
ALTER TABLE review_assets ADD COLUMN upstream_ref TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE review_assets DROP COLUMN upstream_ref;
