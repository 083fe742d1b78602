package v1alpha1

// Reasons of the Kubernetes Events the controllers emit (events.k8s.io/v1,
// `kubectl events` or `kubectl describe`), one per transition a platform
// team would look for.
const (
	// EventTenantRegistered: the tenant got its ledger user ID.
	EventTenantRegistered = "Registered"
	// EventGrantApplied: a grant's quota was added to the tenant's balance.
	EventGrantApplied = "GrantApplied"
	// EventKeyProvisioned: a new API key was generated into the token's Secret.
	EventKeyProvisioned = "KeyProvisioned"
	// EventTokenRegistered: the token got its ledger row and starting balance.
	EventTokenRegistered = "Registered"
	// EventTaskCompleted and EventTaskFailed: a GenerationTask ended.
	EventTaskCompleted = "TaskCompleted"
	EventTaskFailed    = "TaskFailed"
	// EventTaskSettled: a task's charge was confirmed in the ledger.
	EventTaskSettled = "TaskSettled"
	// EventWebhookGaveUp: a task's webhook, or a budget alert's, was not
	// delivered after every attempt.
	EventWebhookGaveUp = "WebhookGaveUp"
	// EventBalanceLow (Warning, Tenant or ApiToken): the balance crossed a
	// threshold of spec.alerts.
	EventBalanceLow = "BalanceLow"
	// EventLimitReached (Warning, ApiToken): the quota used in a day or a
	// month crossed a threshold of spec.alerts.
	EventLimitReached = "LimitReached"
)

// Types of the webhook events a tenant receives when a GenerationTask ends
// (the `type` of the event body).
const (
	WebhookEventTaskCompleted = "task.completed"
	WebhookEventTaskFailed    = "task.failed"
)

// Types of the webhook events of budget alerts (spec.alerts of a Tenant or
// an ApiToken), sent to the tenant's webhook.
const (
	// WebhookEventBalanceLow: a balance fell below a threshold.
	WebhookEventBalanceLow = "balance.low"
	// WebhookEventLimitReached: a key's daily or monthly use reached a
	// threshold of its limit.
	WebhookEventLimitReached = "limit.reached"
)
