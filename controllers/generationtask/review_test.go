package generationtask_test

import (
	"context"
	"fmt"
	"maps"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

// refLibrary is a review service that keeps its own copy of each asset:
// the first question creates it (pending, with a reference), the next
// passes it. It records what it was asked.
type refLibrary struct {
	seen []upstream.ReviewAsset
}

func (l *refLibrary) Decide(_ context.Context, _ upstream.Backend, a upstream.ReviewAsset, _ time.Time) (upstream.ReviewDecision, error) {
	l.seen = append(l.seen, a)
	if a.Ref == "" {
		return upstream.ReviewDecision{State: upstream.ReviewPending, Wait: time.Second, Ref: fmt.Sprintf("lib://%d", len(l.seen))}, nil
	}
	return upstream.ReviewDecision{State: upstream.ReviewPassed}, nil
}

// useLibrary names the review service of the route's simulated backend.
func useLibrary(name string, options map[string]string) {
	GinkgoHelper()
	route := &v1.ModelRoute{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: "modelgate-system", Name: "img"}, route)).To(Succeed())
	route.Spec.Backends[0].Options["assetLibrary"] = name
	maps.Copy(route.Spec.Backends[0].Options, options)
	Expect(c.Update(ctx, route)).To(Succeed())
}

var _ = Describe("GenerationTask reconciler", func() {
	BeforeEach(setUp)

	Describe("private asset review", func() {
		// submitReview turns a fresh task into one asking for review of urls.
		submitReview := func(urls ...string) *v1.GenerationTask {
			t := submit("review me", 1, "sim")
			sub, err := tasks.SubmissionOf(t)
			Expect(err).NotTo(HaveOccurred())
			for _, u := range urls {
				sub.ReviewAssets = append(sub.ReviewAssets, tasks.ReviewAsset{Type: "image", URL: u, Role: "reference_image"})
			}
			// sub is t's spec.submission: the fake client does not enforce immutability.
			t.Spec.PrivateAssetReview = true
			Expect(c.Update(ctx, t)).To(Succeed())
			step(t) // queued
			step(t) // round 1 opens
			return t
		}
		// pending asserts that t waits in its first review round.
		pending := func(t *v1.GenerationTask) {
			GinkgoHelper()
			Expect(t.Status.ReviewRounds).To(HaveLen(1))
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("pending"))
			Expect(t.Status.ReviewRounds[0].Deadline.Time).To(BeTemporally("~", clk.Now().Add(generationtask.DefaultReviewDeadline), time.Second))
		}

		It("starts generation once every asset passed", func() {
			t := submitReview("https://cdn.example/a.png", "https://cdn.example/b.png")
			pending(t)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued)) // the review takes its time
			clk.Step(simulated.DefaultReviewTime)
			step(t)
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(t.Status.ReviewRounds[0].Assets[1].State).To(Equal("passed"))
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
		})

		It("fails without a generation fee when an asset is rejected", func() {
			before := balance()
			t := submitReview("https://cdn.example/ok.png", "https://cdn.example/reject-me.png")
			pending(t)
			clk.Step(simulated.DefaultReviewTime)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("rejected"))
			Expect(t.Status.Error.Message).To(ContainSubstring("reject-me.png"))
			Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("fails without a generation fee when an asset cannot be copied, before the review service sees it", func() {
			before := balance()
			t := submitReview("https://cdn.example/ok.png", "https://cdn.example/unusable.png")
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("rejected"))
			Expect(t.Status.Error.Message).To(Equal("private asset review could not use the image asset https://cdn.example/unusable.png: " +
				"the image asset is empty; no video generation fee is charged"))
			Expect(t.Status.Billing.Status).To(Equal(v1.BillingRefunded))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("fails without a generation fee when the round runs past its deadline", func() {
			before := balance()
			t := submitReview("https://cdn.example/slow.png")
			pending(t)
			clk.Step(time.Minute)
			res := step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskQueued))
			Expect(res.RequeueAfter).To(BeNumerically(">", 0))
			clk.Step(generationtask.DefaultReviewDeadline)
			step(t)
			Expect(t.Status.Phase).To(Equal(v1.TaskFailed))
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("expired"))
			Expect(t.Status.Error.Message).To(ContainSubstring("deadline"))
			Expect(balance().Remain).To(Equal(before.Remain))
		})

		It("shares one preparation between concurrent tasks and reuses a passed asset later", func() {
			first := submitReview("https://cdn.example/shared.png")
			pending(first)
			clk.Step(simulated.DefaultReviewTime / 2)
			second := submitReview("https://cdn.example/shared.png", "https://cdn.example/own.png")
			pending(second)

			By("the shared asset is decided once, on the first task's schedule")
			clk.Step(simulated.DefaultReviewTime / 2)
			step(first)
			step(second)
			Expect(first.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(first.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(second.Status.ReviewRounds[0].Assets[0].State).To(Equal("passed"), "decided with the first task's preparation")
			Expect(second.Status.ReviewRounds[0].Assets[1].State).To(Equal("pending"), "its own asset is still under review")
			clk.Step(simulated.DefaultReviewTime / 2)
			step(second)
			Expect(second.Status.Phase).To(Equal(v1.TaskInProgress))

			By("a later task with the same asset on the same channel passes at once")
			clk.Step(time.Hour)
			third := submitReview("https://cdn.example/shared.png")
			Expect(third.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(third.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(copies.urls()).To(Equal([]string{"https://cdn.example/shared.png", "https://cdn.example/own.png"}),
				"each asset is copied once, by the preparation that started it")
		})

		It("records the library's reference of each asset and asks with the copy's link and that reference", func() {
			lib := &refLibrary{}
			r.Upstreams = upstream.NewRegistry(upstream.Entry{Name: "simulated", Adapter: simulated.Media{}},
				upstream.Entry{Name: "reflib", Adapter: lib})
			useLibrary("reflib", nil)
			t := submitReview("https://cdn.example/a.png")
			pending(t)
			Expect(t.Status.ReviewRounds[0].Assets[0].UpstreamRef).To(Equal("lib://1"), "recorded while pending")
			step(t)
			Expect(t.Status.ReviewRounds[0].Outcome).To(Equal("passed"))
			Expect(t.Status.ReviewRounds[0].Assets[0].UpstreamRef).To(Equal("lib://1"))
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(lib.seen).To(HaveLen(2))
			Expect(lib.seen[0].CopyURL).NotTo(BeEmpty(), "the library is given a link to the copy")
			Expect(lib.seen[0].CopyURL).NotTo(ContainSubstring("cdn.example"))
			Expect(lib.seen[1].Ref).To(Equal("lib://1"), "asked again about the asset it created")

			By("a later task reuses the passed record and its reference without asking")
			again := submitReview("https://cdn.example/a.png")
			Expect(again.Status.ReviewRounds[0].Assets[0].UpstreamRef).To(Equal("lib://1"))
			Expect(again.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(lib.seen).To(HaveLen(2))
		})

		It("skips review on an Ark channel without an asset group", func() {
			useLibrary("ark", nil)
			t := submitReview("https://cdn.example/a.png")
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(t.Status.ReviewRounds).To(BeEmpty())
		})

		It("skips review on a channel without a private asset library", func() {
			route := &v1.ModelRoute{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: "modelgate-system", Name: "img"}, route)).To(Succeed())
			route.Spec.Backends[0].Options["assetLibrary"] = "none"
			Expect(c.Update(ctx, route)).To(Succeed())
			t := submitReview("https://cdn.example/reject-me.png")
			Expect(t.Status.Phase).To(Equal(v1.TaskInProgress))
			Expect(t.Status.ReviewRounds).To(BeEmpty())
		})
	})
})
