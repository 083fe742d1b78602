package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestTaskArchive(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		rec := TaskRecord{TaskID: "task_a", UserID: 7, TokenID: 3, RequestID: "req_a", Kind: "video", Model: "v",
			Status: "queued", BillingStatus: "pending", ClientBusinessID: "order-1", Body: []byte(`{"x":1}`), CreatedAt: 100}
		g.Expect(s.UpsertTask(ctx, rec)).To(Succeed())

		got, err := s.TaskByID(ctx, 7, "task_a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal("queued"))
		g.Expect(got.CompletedAt).To(BeZero())
		g.Expect(json.Valid(got.Body)).To(BeTrue())

		// A later state overwrites status, billing and body, not identity.
		rec.Status, rec.BillingStatus, rec.Quota, rec.CompletedAt = "completed", "settled", 125000, 160
		rec.Body, rec.UserID = []byte(`{"x":2}`), 99
		g.Expect(s.UpsertTask(ctx, rec)).To(Succeed())
		got, err = s.TaskByClientBusinessID(ctx, 7, "video", "order-1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.TaskID).To(Equal("task_a"))
		g.Expect(got.Status).To(Equal("completed"))
		g.Expect(got.Quota).To(Equal(int64(125000)))
		g.Expect(got.CompletedAt).To(Equal(int64(160)))
		var body map[string]int
		g.Expect(json.Unmarshal(got.Body, &body)).To(Succeed())
		g.Expect(body["x"]).To(Equal(2))

		// InsertTask never overwrites a newer state.
		rec.Status = "queued"
		inserted, err := s.InsertTask(ctx, rec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(inserted).To(BeFalse())
		got, err = s.TaskByID(ctx, 7, "task_a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal("completed"))
		inserted, err = s.InsertTask(ctx, TaskRecord{TaskID: "task_n", UserID: 7, RequestID: "r", Kind: "image", Model: "m",
			Status: "queued", CreatedAt: 5})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(inserted).To(BeTrue())

		// Another user, another kind or an unknown ID: not found.
		for _, err := range []error{
			func() error { _, err := s.TaskByID(ctx, 8, "task_a"); return err }(),
			func() error { _, err := s.TaskByID(ctx, 7, "task_b"); return err }(),
			func() error { _, err := s.TaskByClientBusinessID(ctx, 7, "image", "order-1"); return err }(),
			func() error { _, err := s.TaskByClientBusinessID(ctx, 8, "video", "order-1"); return err }(),
			func() error { _, err := s.TaskByClientBusinessID(ctx, 7, "video", ""); return err }(),
		} {
			g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "%v", err)
		}
	})
}
