package store

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestResponseStateIsPerUser(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		s := openStore(t, dsn)
		ctx := context.Background()
		state := []byte(`{"input":[{"role":"user","content":"hi"}],"output":[]}`)
		g.Expect(s.SaveResponse(ctx, "resp_1", 7, "m", state)).To(Succeed())
		got, err := s.LoadResponse(ctx, "resp_1", 7)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(MatchJSON(state))

		_, err = s.LoadResponse(ctx, "resp_1", 8)
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "another user's response")
		_, err = s.LoadResponse(ctx, "resp_2", 7)
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue())

		g.Expect(s.SaveResponse(ctx, "resp_1", 7, "m", []byte(`{"input":[],"output":[1]}`))).To(Succeed())
		got, _ = s.LoadResponse(ctx, "resp_1", 7)
		g.Expect(got).To(MatchJSON(`{"input":[],"output":[1]}`))

		g.Expect(errors.Is(s.DeleteResponse(ctx, "resp_1", 8), ErrNotFound)).To(BeTrue(), "another user's response")
		g.Expect(s.DeleteResponse(ctx, "resp_1", 7)).To(Succeed())
		_, err = s.LoadResponse(ctx, "resp_1", 7)
		g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue(), "deleted")
		g.Expect(errors.Is(s.DeleteResponse(ctx, "resp_1", 7), ErrNotFound)).To(BeTrue(), "deleted twice")
	})
}
