package handlers_test

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("usage endpoints", func() {
	var (
		acct    *framework.Account
		headers map[string]string
		t0      int64
	)

	accessToken := func(a *framework.Account) string {
		s := &corev1.Secret{}
		Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Tenant.Status.AccessTokenSecretName}, s)).To(Succeed())
		return string(s.Data[v1.AccessTokenSecretKey])
	}

	BeforeEach(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{Grants: []v1.Grant{{ID: "g", Credits: credits("1000")}}},
			v1.ApiTokenSpec{Quota: ptr.To[int64](1000000)})
		Expect(err).NotTo(HaveOccurred())
		// The access token works once this gateway's cache has the tenant.
		Expect(stack.WaitCached(ctx, acct.Tenant)).To(Succeed())
		headers = map[string]string{
			"Authorization": "Bearer " + accessToken(acct),
			"X-User-Id":     strconv.FormatInt(acct.Tenant.Status.UserID, 10),
		}
		t0 = time.Now().Add(-time.Hour).Unix()
		rows := make([]store.UsageRow, 0, 5)
		for i := range 5 {
			rows = append(rows, store.UsageRow{
				RequestID: fmt.Sprintf("%s-%d", acct.Namespace, i), CreatedAt: t0 + int64(i),
				UserID: acct.Tenant.Status.UserID, TokenID: acct.Token.Status.TokenID, TokenName: "test key",
				ModelName: "sim-chat", PromptTokens: 100, CompletionTokens: int64(10 * (i + 1)),
				BillingPhase: store.PhaseSettled, Quota: billing.Quota(1000 * (i + 1)), Backend: "secret-backend",
			})
		}
		n, err := stack.Ledger.InsertUsage(ctx, rows)
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(5))
	})

	window := func(extra string) string {
		return fmt.Sprintf("?start_timestamp=%d&end_timestamp=%d%s", t0, t0+3600, extra)
	}

	It("lists billable requests newest first, page by page, without internals", func() {
		code, body, _ := call("GET", "/api/usage/tokens/requests"+window("&page_size=2"), headers, nil)
		Expect(code).To(Equal(200))
		Expect(body["success"]).To(BeTrue())
		data := body["data"].([]any)
		Expect(data).To(HaveLen(2))
		first := data[0].(map[string]any)
		Expect(num(first["created_at"])).To(Equal(jsonInt(t0 + 4)))
		Expect(num(first["prompt_tokens"])).To(Equal("100"))
		Expect(num(first["completion_tokens"])).To(Equal("50"))
		Expect(num(first["total_tokens"])).To(Equal("150"))
		Expect(num(first["quota"])).To(Equal("5000"))
		Expect(first["cost_usd"]).To(Equal("0.01"))
		Expect(first["billing_phase"]).To(Equal("settled"))
		Expect(first["task_id"]).To(Equal(""))
		Expect(first["cache_tokens"]).To(BeNil())
		Expect(first).To(HaveKey("cache_tokens"))
		Expect(first).NotTo(HaveKey("backend"))
		Expect(fmt.Sprint(body)).NotTo(ContainSubstring("secret-backend"))

		meta := body["meta"].(map[string]any)
		Expect(meta["has_more"]).To(BeTrue())
		Expect(num(meta["page_size"])).To(Equal("2"))
		Expect(meta["cost_basis"]).To(Equal("consume_log_quota"))
		Expect(meta["currency"]).To(Equal("USD"))
		Expect(meta["quota_per_usd"]).To(Equal("500000"))
		Expect(meta["consume_logging_enabled"]).To(BeTrue())
		Expect(meta["refunds_included"]).To(BeFalse())
		Expect(meta["total_tokens_basis"]).To(Equal("logged_prompt_plus_completion"))

		seen := len(data)
		cursor := meta["next_cursor"].(string)
		for cursor != "" {
			code, body, _ = call("GET", "/api/usage/tokens/requests"+window("&page_size=2&cursor="+url.QueryEscape(cursor)), headers, nil)
			Expect(code).To(Equal(200))
			seen += len(body["data"].([]any))
			cursor = body["meta"].(map[string]any)["next_cursor"].(string)
			if cursor == "" {
				Expect(body["meta"].(map[string]any)["has_more"]).To(BeFalse())
			}
		}
		Expect(seen).To(Equal(5))
	})

	It("ends a window given only its start now, and keeps that end across its pages", func() {
		before := time.Now().Unix()
		code, body, _ := call("GET", fmt.Sprintf("/api/usage/tokens/requests?start_timestamp=%d&page_size=2", t0), headers, nil)
		Expect(code).To(Equal(200), "%v", body)
		Expect(body["data"].([]any)).To(HaveLen(2))
		meta := body["meta"].(map[string]any)
		end, err := strconv.ParseInt(num(meta["end_timestamp"]), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(end).To(BeNumerically(">", before))
		Expect(end).To(BeNumerically("<=", time.Now().Unix()+1))

		// A row that lands after the first page, inside the window the
		// pages would have if "now" moved on, is not on a later page: the
		// cursor keeps the first page's end.
		late := store.UsageRow{RequestID: acct.Namespace + "-late", CreatedAt: end, UserID: acct.Tenant.Status.UserID,
			TokenID: acct.Token.Status.TokenID, ModelName: "sim-chat", BillingPhase: store.PhaseSettled, Quota: 1}
		_, err = stack.Ledger.InsertUsage(ctx, []store.UsageRow{late})
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(1100 * time.Millisecond) // now moves past the first page's end
		seen := 2
		cursor := meta["next_cursor"].(string)
		for cursor != "" {
			code, body, _ = call("GET", fmt.Sprintf("/api/usage/tokens/requests?start_timestamp=%d&page_size=2&cursor=%s", t0, url.QueryEscape(cursor)), headers, nil)
			Expect(code).To(Equal(200), "%v", body)
			Expect(num(body["meta"].(map[string]any)["end_timestamp"])).To(Equal(strconv.FormatInt(end, 10)))
			seen += len(body["data"].([]any))
			cursor = body["meta"].(map[string]any)["next_cursor"].(string)
		}
		Expect(seen).To(Equal(5))

		code, body, _ = call("GET", fmt.Sprintf("/api/usage/tokens/summary?start_timestamp=%d", t0), headers, nil)
		Expect(code).To(Equal(200), "%v", body)
		Expect(num(body["data"].([]any)[0].(map[string]any)["request_count"])).To(Equal("6"))
	})

	It("summarizes per key", func() {
		code, body, _ := call("GET", "/api/usage/tokens/summary"+window(""), headers, nil)
		Expect(code).To(Equal(200))
		data := body["data"].([]any)
		Expect(data).To(HaveLen(1))
		row := data[0].(map[string]any)
		Expect(num(row["token_id"])).To(Equal(jsonInt(acct.Token.Status.TokenID)))
		Expect(num(row["request_count"])).To(Equal("5"))
		Expect(num(row["prompt_tokens"])).To(Equal("500"))
		Expect(num(row["completion_tokens"])).To(Equal("150"))
		Expect(num(row["total_tokens"])).To(Equal("650"))
		Expect(num(row["quota"])).To(Equal("15000"))
		Expect(row["cost_usd"]).To(Equal("0.03"))
	})

	DescribeTable("refuses a bad query with 422 invalid_query",
		func(query func() string) {
			code, body, _ := call("GET", "/api/usage/tokens/requests"+query(), headers, nil)
			Expect(code).To(Equal(422))
			Expect(body["success"]).To(BeFalse())
			Expect(body["error"].(map[string]any)["code"]).To(Equal("invalid_query"))
			Expect(body["error"].(map[string]any)["message"]).NotTo(BeEmpty())
		},
		Entry("an unknown parameter", func() string { return window("&model=x") }),
		Entry("a repeated parameter", func() string { return window("&page_size=2&page_size=3") }),
		Entry("a window of 32 days", func() string {
			return fmt.Sprintf("?start_timestamp=%d&end_timestamp=%d", t0, t0+32*86400)
		}),
		Entry("an end before the start", func() string {
			return fmt.Sprintf("?start_timestamp=%d&end_timestamp=%d", t0, t0)
		}),
		Entry("no start", func() string { return fmt.Sprintf("?end_timestamp=%d", t0) }),
		Entry("only a start 32 days ago", func() string {
			return fmt.Sprintf("?start_timestamp=%d", time.Now().Add(-32*24*time.Hour).Unix())
		}),
		Entry("page_size 101", func() string { return window("&page_size=101") }),
		Entry("page_size 0", func() string { return window("&page_size=0") }),
		Entry("a cursor of another window", func() string {
			_, body, _ := call("GET", "/api/usage/tokens/requests"+window("&page_size=1"), headers, nil)
			c := body["meta"].(map[string]any)["next_cursor"].(string)
			return fmt.Sprintf("?start_timestamp=%d&end_timestamp=%d&page_size=1&cursor=%s", t0, t0+7200, url.QueryEscape(c))
		}),
	)

	It("requires the account's access token and user ID, not an API key", func() {
		for _, h := range []map[string]string{
			{},
			{"Authorization": headers["Authorization"]},
			{"Authorization": "Bearer " + acct.Key, "X-User-Id": headers["X-User-Id"]},
			{"Authorization": headers["Authorization"], "X-User-Id": "999999"},
		} {
			code, body, _ := call("GET", "/api/usage/tokens/requests"+window(""), h, nil)
			Expect(code).To(Equal(401))
			Expect(body["error"].(map[string]any)["code"]).To(Equal("unauthorized"))
		}
	})

	It("never shows another account's rows", func() {
		other, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		h := map[string]string{
			"Authorization": "Bearer " + accessToken(other),
			"X-User-Id":     strconv.FormatInt(other.Tenant.Status.UserID, 10),
		}
		// The new tenant's access token works once this gateway's cache has it.
		var body map[string]any
		Eventually(func() int {
			var code int
			code, body, _ = call("GET", "/api/usage/tokens/requests"+window(""), h, nil)
			return code
		}, framework.Timeout, framework.Interval).Should(Equal(200))
		Expect(body["data"]).To(BeEmpty())
	})
})
