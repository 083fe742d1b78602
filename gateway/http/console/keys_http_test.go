package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/http/console"
)

var (
	csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	newKeyBox = regexp.MustCompile(`id="new-key-value" readonly value="(sk-[^"]+)"`)
)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("the page has no CSRF token")
	}
	return m[1]
}

// keyStatus is the status of an API call with key (GET /v1/models).
func keyStatus(t *testing.T, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", stack.BaseURL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond until it holds or the framework's timeout passes
// (the gateway's cache follows the API server by a watch event).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func TestManageKeys(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "manage key", 0)
	c := signIn(t, tn)
	origin := map[string]string{"Origin": stack.BaseURL}
	csrf := csrfOf(t, page(t, "/console/keys", c))

	// Without the CSRF token, or with a wrong one, nothing is created.
	for _, token := range []string{"", "forged", strings.ToUpper(csrf)} {
		resp, _ := do(t, "POST", "/console/keys", url.Values{"name": {"no csrf"}, "csrf_token": {token}}, c, origin)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("create with CSRF token %q: status %d, want 403", token, resp.StatusCode)
		}
	}
	// Another session's token does not fit this one.
	other := signIn(t, newTenant(t, "other key", 0))
	resp, _ := do(t, "POST", "/console/keys", url.Values{"name": {"x"}, "csrf_token": {csrf}}, other, origin)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another session's CSRF token: status %d, want 403", resp.StatusCode)
	}
	resp, _ = do(t, "POST", "/console/keys", url.Values{"name": {"x"}, "csrf_token": {csrf}}, c, map[string]string{"Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin create: status %d, want 403", resp.StatusCode)
	}

	// A refusal of the shared rules keeps the form and says why.
	resp, body := do(t, "POST", "/console/keys", url.Values{"name": {"too big"}, "credits": {"999999"}, "csrf_token": {csrf}}, c, origin)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "exceed what the account has left") {
		t.Fatalf("create beyond the balance: status %d: %s", resp.StatusCode, body)
	}

	resp, body = do(t, "POST", "/console/keys", url.Values{"name": {"service a"}, "credits": {"100"}, "monthly_credits": {"50"},
		"rpm": {"30"}, "csrf_token": {csrf}}, c, origin)
	m := newKeyBox.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("create: status %d, no key shown: %s", resp.StatusCode, body)
	}
	key := m[1]
	if got := keyStatus(t, key); got != http.StatusOK {
		t.Fatalf("the new key right after creation: status %d, want 200", got)
	}
	if strings.Contains(page(t, "/console/keys", c), key) {
		t.Fatal("the Keys page shows the key again")
	}
	list := &v1.ApiTokenList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(tn.acct.Namespace), client.MatchingLabels{console.ManagedByLabel: console.ManagedByConsole}); err != nil || len(list.Items) != 1 {
		t.Fatalf("console keys: %d, %v", len(list.Items), err)
	}
	tok := list.Items[0]
	if tok.Spec.DisplayName != "service a" || *tok.Spec.Quota != 250000 || tok.Spec.MonthlyQuota != 125000 || tok.Spec.RequestsPerMinute != 30 ||
		tok.Annotations[console.LastActorAnnotation] != console.AccessTokenActor {
		t.Fatalf("the key as written: %+v %v", tok.Spec, tok.Annotations)
	}

	// `kubectl get apitokens` shows who manages the key (the table the API
	// server renders from the CRD's printer columns).
	if got := managedByColumn(t, tn.acct.Namespace, tok.Name); got != console.ManagedByConsole {
		t.Fatalf("the Managed By column: %q, want console", got)
	}

	// Disable: the key is refused as soon as the cache has the change.
	resp, _ = do(t, "POST", "/console/keys/"+tok.Name+"/state", url.Values{"disabled": {"true"}, "csrf_token": {csrf}}, c, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: status %d", resp.StatusCode)
	}
	eventually(t, "the disabled key is refused with 401", func() bool { return keyStatus(t, key) == http.StatusUnauthorized })

	// Limits, then delete (only when confirmed).
	resp, _ = do(t, "POST", "/console/keys/"+tok.Name+"/limits", url.Values{"monthly_credits": {"10"}, "csrf_token": {csrf}}, c, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit limits: status %d", resp.StatusCode)
	}
	got := &v1.ApiToken{}
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&tok), got); err != nil || got.Spec.MonthlyQuota != 25000 || got.Spec.RequestsPerMinute != 0 {
		t.Fatalf("after editing limits: %+v, %v", got.Spec, err)
	}
	resp, _ = do(t, "POST", "/console/keys/"+tok.Name+"/delete", url.Values{"csrf_token": {csrf}}, c, origin)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("delete without confirmation: status %d, want 422", resp.StatusCode)
	}

	// A GitOps key is read-only on the page and refused by the server.
	gitops := &v1.ApiToken{}
	gitops.Namespace, gitops.Name = tn.acct.Namespace, "pipeline-key"
	gitops.Labels = map[string]string{console.ManagedByLabel: console.ManagedByGitOps}
	gitops.Spec = v1.ApiTokenSpec{DisplayName: "pipeline key", Quota: ptr.To[int64](1000)}
	if err := stack.Client.Create(ctx, gitops); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitCached(ctx, gitops); err != nil {
		t.Fatal(err)
	}
	if body := page(t, "/console/keys", c); !strings.Contains(body, "managed by GitOps") || strings.Contains(body, "/console/keys/pipeline-key/state") {
		t.Fatalf("the GitOps key is not read-only on the page: %s", body)
	}
	for _, a := range []string{"state", "limits", "delete"} {
		resp, body := do(t, "POST", "/console/keys/pipeline-key/"+a, url.Values{"disabled": {"true"}, "monthly_credits": {"1"}, "confirm": {"delete"},
			"csrf_token": {csrf}}, c, origin)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "managed by GitOps") {
			t.Fatalf("%s on the GitOps key: status %d", a, resp.StatusCode)
		}
	}
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(gitops), gitops); err != nil || gitops.Spec.Disabled || gitops.DeletionTimestamp != nil {
		t.Fatalf("the GitOps key was changed: %+v, %v", gitops.Spec, err)
	}
	// Another tenant's key is not this session's to change.
	resp, _ = do(t, "POST", "/console/keys/"+tok.Name+"/state", url.Values{"disabled": {"false"}, "csrf_token": {csrfOf(t, page(t, "/console/keys", other))}}, other, origin)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant's key: status %d, want 404", resp.StatusCode)
	}

	resp, _ = do(t, "POST", "/console/keys/"+tok.Name+"/delete", url.Values{"confirm": {"delete"}, "csrf_token": {csrf}}, c, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: status %d", resp.StatusCode)
	}

	// The audit trail: an Event per action on the key, listed on the page.
	events := &corev1.EventList{}
	if err := stack.Client.List(ctx, events, client.InNamespace(tn.acct.Namespace)); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range events.Items {
		if ev.Source.Component == console.EventSource && ev.InvolvedObject.Name == tok.Name {
			actions = append(actions, ev.Action)
		}
	}
	if len(actions) != 4 {
		t.Fatalf("audit events of the key: %v, want Created, Disabled, LimitsChanged, Deleted", actions)
	}
	audit := page(t, "/console/audit", c)
	for _, want := range []string{"Created", "Disabled", "LimitsChanged", "Deleted", "access token", "service a"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	if strings.Contains(page(t, "/console/audit", other), tok.Name) {
		t.Error("another tenant's audit page shows this tenant's actions")
	}
}

// managedByColumn is the "Managed By" cell of the key in the API server's
// table of ApiTokens, as kubectl get prints it.
func managedByColumn(t *testing.T, ns, name string) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", strings.TrimSuffix(stack.Config.Host, "/")+"/apis/modelgate.io/v1alpha1/namespaces/"+ns+"/apitokens/"+name, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("table: %v, %d rows", err, len(table.Rows))
	}
	for i, col := range table.ColumnDefinitions {
		if col.Name == "Managed By" {
			s, _ := table.Rows[0].Cells[i].(string)
			return s
		}
	}
	t.Fatal("the table has no Managed By column")
	return ""
}
