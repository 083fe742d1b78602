package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// Who manages an ApiToken: the label ManagedByLabel says it. A key a
// pipeline owns (ManagedByGitOps) is shown read-only and the console refuses
// to change it, so GitOps stays its source of truth; keys the console made
// carry ManagedByConsole (a column of `kubectl get apitokens`).
const (
	ManagedByLabel   = "modelgate.io/managed-by"
	ManagedByGitOps  = "gitops"
	ManagedByConsole = "console"
	// LastActorAnnotation and LastActionAtAnnotation name who last changed
	// the key through the console, and when (RFC 3339, UTC).
	LastActorAnnotation    = "modelgate.io/last-actor"
	LastActionAtAnnotation = "modelgate.io/last-action-at"
	// EventSource is the source component of the console's Events, by which
	// the audit page finds them.
	EventSource = "modelgate-console"
)

// AccessTokenActor is the actor of an action in a session signed in with
// the account's usage access token: it names no person, since every holder
// of the token signs in the same way.
const AccessTokenActor = "access token"

// actorOf names who acts in the request's session: the OIDC actor
// ("oidc:<issuer host>:<subject>") of an OIDC session, else
// AccessTokenActor.
func (c *Console) actorOf(r *http.Request) string {
	if s := c.oidcSessionOf(r); s != nil {
		return oidcActor(s)
	}
	return AccessTokenActor
}

// mayManageKeys is the role check of the key actions: the access-token
// sign-in holds the account's own credential, so it may manage the
// account's keys; an OIDC session may when its role is key manager.
func (c *Console) mayManageKeys(r *http.Request, _ *v1.Tenant) bool {
	if s := c.oidcSessionOf(r); s != nil {
		return s.Role == RoleKeyManager
	}
	return true
}

// actionFunc changes something for a signed-in tenant whose form has passed
// the checks of action.
type actionFunc func(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor string)

// action runs a state-changing form: a session, a same-origin post, a form
// that parses, its session's CSRF token, and the role. Anything else is
// refused with 403 before the action sees it.
func (c *Console) action(do actionFunc) http.Handler {
	return c.session(func(w http.ResponseWriter, r *http.Request, t *v1.Tenant) {
		if !sameOrigin(r) {
			http.Error(w, "cross-origin form refused", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the form could not be read", http.StatusBadRequest)
			return
		}
		if !c.checkCSRF(r) {
			http.Error(w, "the form's CSRF token is missing or not this session's: reload the page", http.StatusForbidden)
			return
		}
		if !c.mayManageKeys(r, t) {
			http.Error(w, "this sign-in may not manage keys", http.StatusForbidden)
			return
		}
		do(w, r, t, c.actorOf(r))
	})
}

// refusalText is the console's wording of tokenspec.Plan's refusals.
var refusalText = map[tokenspec.Reason]string{
	tokenspec.NameRequired:     "A key needs a name.",
	tokenspec.NameTooLong:      "A key's name is at most 50 characters.",
	tokenspec.ExpiresInPast:    "The expiry must be in the future.",
	tokenspec.NegativeAmount:   "Amounts and limits must not be negative.",
	tokenspec.GroupNotAllowed:  "The account may not use that group.",
	tokenspec.ExceedsUnlimited: "Only an account with unlimited quota may create an unlimited key.",
	tokenspec.ExceedsQuota:     "The key's credits exceed what the account has left.",
	tokenspec.ExceedsDaily:     "The daily limit exceeds the account's.",
	tokenspec.ExceedsMonthly:   "The monthly limit exceeds the account's.",
	tokenspec.ExceedsExpiry:    "The expiry is later than the account allows.",
	tokenspec.ExceedsModels:    "The model allow-list names a model the account may not use.",
}

// KeyForm is the key form of the Keys page, as posted.
type KeyForm struct {
	Name, Credits, Expires, Models, Group string
	Unlimited                             bool
	RPM, TPM, Daily, Monthly              string
}

func keyForm(r *http.Request) KeyForm {
	f := r.PostForm
	return KeyForm{
		Name: strings.TrimSpace(f.Get("name")), Credits: strings.TrimSpace(f.Get("credits")),
		Unlimited: f.Get("unlimited") == "on", Expires: strings.TrimSpace(f.Get("expires")),
		Models: strings.TrimSpace(f.Get("models")), Group: strings.TrimSpace(f.Get("group")),
		RPM: strings.TrimSpace(f.Get("rpm")), TPM: strings.TrimSpace(f.Get("tpm")),
		Daily: strings.TrimSpace(f.Get("daily_credits")), Monthly: strings.TrimSpace(f.Get("monthly_credits")),
	}
}

// expiresLayout is the value of an <input type="datetime-local">, read as UTC.
const expiresLayout = "2006-01-02T15:04"

// Request converts the form to the shared key request; the string is the
// form's own error (a field that is not a number), else empty.
func (f KeyForm) Request() (tokenspec.Request, string) {
	req := tokenspec.Request{Name: f.Name, Unlimited: f.Unlimited, Group: f.Group}
	var msg string
	credits := func(s, field string) billing.Quota {
		if s == "" || msg != "" {
			return 0
		}
		q, err := billing.QuotaFromCreditsText(s)
		if err != nil {
			msg = field + " must be a number of credits, at least 0."
		}
		return q
	}
	integer := func(s, field string, bits int) int64 {
		if s == "" || msg != "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil || n < 0 {
			msg = field + " must be a whole number, at least 0."
		}
		return n
	}
	if !f.Unlimited {
		req.Quota = credits(f.Credits, "Credits")
	}
	req.Daily = credits(f.Daily, "The daily limit")
	req.Monthly = credits(f.Monthly, "The monthly limit")
	req.RequestsPerMinute = int32(integer(f.RPM, "Requests per minute", 32))
	req.TokensPerMinute = integer(f.TPM, "Tokens per minute", 64)
	if f.Expires != "" && msg == "" {
		t, err := time.Parse(expiresLayout, f.Expires)
		if err != nil {
			msg = "The expiry must be a date and time (UTC)."
		}
		req.ExpiresAt = &t
	}
	for _, m := range strings.Split(f.Models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			req.ModelLimitsEnabled = true
			req.ModelLimits = append(req.ModelLimits, v1.ModelID(m))
		}
	}
	return req, msg
}

// bounds are what the account may grant a key: its unlimited flag, and
// otherwise what it has left to spend (balance, leases and credit line, as
// the Overview's "available"). It has no period caps, expiry or model list
// of its own to pass on.
func (c *Console) bounds(ctx context.Context, t *v1.Tenant) (tokenspec.Bounds, error) {
	b, leased, _, err := c.d.Ledger.TenantStanding(ctx, t.Status.UserID)
	if err != nil {
		return tokenspec.Bounds{}, err
	}
	return tokenspec.Bounds{Unlimited: b.Unlimited || t.Spec.UnlimitedQuota, Remain: b.Remain + leased + b.CreditLimit}, nil
}

// newKey is the key just created, shown once on the page that answers the
// form and never again.
type newKey struct {
	Name, Key string
}

// createKey makes a key through the path POST /v1/tokens takes
// (tokenspec.Plan, NewApiToken, Create) with the account as the creator.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor string) {
	ctx := r.Context()
	form := keyForm(r)
	req, msg := form.Request()
	if msg == "" {
		b, err := c.bounds(ctx, t)
		if err != nil {
			c.fail(w, r, "keys", t, err, "The account's balance cannot be read right now.")
			return
		}
		var refused tokenspec.Reason
		if req, refused = tokenspec.Plan(req, t, b, c.d.Clock.Now()); refused != "" {
			msg = refusalText[refused]
		}
	}
	if msg != "" {
		c.keysPage(w, r, t, http.StatusUnprocessableEntity, msg, nil, form)
		return
	}
	key, err := keys.NewAPIKey()
	if err != nil {
		c.fail(w, r, "keys", t, err, "The key could not be created.")
		return
	}
	tok := tokenspec.NewApiToken(req, t.Namespace, key, map[string]string{ManagedByLabel: ManagedByConsole})
	stamp(tok, actor, c.d.Clock.Now())
	if _, err := tokenspec.Create(ctx, c.d.Writer, c.d.Registry, tok, t.Status.UserID); err != nil {
		c.fail(w, r, "keys", t, err, "The key could not be created.")
		return
	}
	c.record(ctx, tok, actor, "Created", fmt.Sprintf("%s created key %q", actor, req.Name))
	tokenspec.AwaitCached(ctx, c.d.KnowsKey, tok.Spec.KeyHash)
	c.keysPage(w, r, t, http.StatusOK, "", &newKey{Name: req.Name, Key: key}, KeyForm{})
}

// stamp writes the last actor and time on the key.
func stamp(tok *v1.ApiToken, actor string, now time.Time) {
	if tok.Annotations == nil {
		tok.Annotations = map[string]string{}
	}
	tok.Annotations[LastActorAnnotation] = actor
	tok.Annotations[LastActionAtAnnotation] = now.UTC().Format(time.RFC3339)
}

// record writes the audit Event of an action on the key. A failure is
// logged, not shown: the change itself is made and stamped on the object.
func (c *Console) record(ctx context.Context, tok *v1.ApiToken, actor, reason, message string) {
	now := metav1.NewTime(c.d.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: tok.Name + ".console-", Namespace: tok.Namespace,
			Annotations: map[string]string{LastActorAnnotation: actor}},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "ApiToken",
			Namespace: tok.Namespace, Name: tok.Name, UID: tok.UID},
		Reason: "Console" + reason, Message: message, Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: EventSource}, ReportingController: "modelgate.io/console",
		ReportingInstance: EventSource, Action: reason,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		EventTime: metav1.NewMicroTime(now.Time), // orders actions within a second on the audit page
	}
	// The change is made: its record must not be lost to a browser that
	// leaves before the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.d.Writer.Create(ctx, ev); err != nil {
		logError(ctx, "record the console's audit event", err)
	}
}

// managedKey is a key of the tenant the console may change, or the status
// and message that say why not.
func (c *Console) managedKey(ctx context.Context, t *v1.Tenant, name string) (*v1.ApiToken, int, string) {
	tok := &v1.ApiToken{}
	if err := c.d.Live.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, tok); err != nil || !tok.DeletionTimestamp.IsZero() {
		return nil, http.StatusNotFound, "That key does not exist (any more)."
	}
	if tok.Labels[ManagedByLabel] == ManagedByGitOps {
		return nil, http.StatusForbidden, gitopsReason
	}
	return tok, 0, ""
}

// gitopsReason is why a GitOps-owned key is read-only.
const gitopsReason = "This key is managed by GitOps (label " + ManagedByLabel + ": " + ManagedByGitOps +
	"): change it in its repository, not here."

// changeKey applies a change to a key the console may change, stamps it and
// records it, then shows the Keys page again.
func (c *Console) changeKey(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor, reason string,
	change func(tok *v1.ApiToken) (message string, refusal string)) {
	ctx := r.Context()
	tok, status, msg := c.managedKey(ctx, t, r.PathValue("name"))
	if tok == nil {
		c.keysPage(w, r, t, status, msg, nil, KeyForm{})
		return
	}
	before := tok.DeepCopy()
	message, refusal := change(tok)
	if refusal != "" {
		c.keysPage(w, r, t, http.StatusUnprocessableEntity, refusal, nil, KeyForm{})
		return
	}
	if reason == "Deleted" {
		if err := c.d.Writer.Delete(ctx, tok, client.Preconditions{UID: &tok.UID}); err != nil {
			c.fail(w, r, "keys", t, err, "The key could not be deleted.")
			return
		}
	} else {
		stamp(tok, actor, c.d.Clock.Now())
		// A merge patch of the fields the form changed: the controller's
		// status writes in between do not conflict with it.
		if err := c.d.Writer.Patch(ctx, tok, client.MergeFrom(before)); err != nil {
			c.fail(w, r, "keys", t, err, "The key could not be changed; reload the page and try again.")
			return
		}
	}
	c.record(ctx, tok, actor, reason, actor+" "+message)
	http.Redirect(w, r, Prefix+"keys", http.StatusSeeOther)
}

func (c *Console) setKeyState(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor string) {
	disable := r.PostForm.Get("disabled") == "true"
	reason := map[bool]string{true: "Disabled", false: "Enabled"}[disable]
	c.changeKey(w, r, t, actor, reason, func(tok *v1.ApiToken) (string, string) {
		tok.Spec.Disabled = disable
		return fmt.Sprintf("%s key %q", strings.ToLower(reason), tok.Spec.DisplayName), ""
	})
}

// editLimits changes the key's period caps and rates. They only restrict
// the key, so no bound of the account applies beyond the form's own checks.
func (c *Console) editLimits(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor string) {
	form := keyForm(r)
	c.changeKey(w, r, t, actor, "LimitsChanged", func(tok *v1.ApiToken) (string, string) {
		form.Name = tok.Spec.DisplayName
		req, msg := form.Request()
		if msg != "" {
			return "", msg
		}
		tok.Spec.DailyQuota, tok.Spec.MonthlyQuota = int64(req.Daily), int64(req.Monthly)
		tok.Spec.RequestsPerMinute, tok.Spec.TokensPerMinute = req.RequestsPerMinute, req.TokensPerMinute
		return fmt.Sprintf("set the limits of key %q: daily %s, monthly %s USD, %d requests/min, %d tokens/min",
			tok.Spec.DisplayName, req.Daily.CostUSD(), req.Monthly.CostUSD(), req.RequestsPerMinute, req.TokensPerMinute), ""
	})
}

// deleteKey deletes the key when the form confirms it; the controller's
// ledger finalizer disables it in the ledger.
func (c *Console) deleteKey(w http.ResponseWriter, r *http.Request, t *v1.Tenant, actor string) {
	confirmed := r.PostForm.Get("confirm") == "delete"
	c.changeKey(w, r, t, actor, "Deleted", func(tok *v1.ApiToken) (string, string) {
		if !confirmed {
			return "", "Tick the confirmation to delete the key."
		}
		return fmt.Sprintf("deleted key %q", tok.Spec.DisplayName), ""
	})
}
