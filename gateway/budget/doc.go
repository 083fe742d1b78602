// Package budget measures budget alerts: the thresholds of a Tenant's or an
// ApiToken's spec.alerts against the ledger's figures, and the state each
// threshold moves to (docs/billing.md, "Alerts"). Its functions are pure:
// the controllers read the figures from the ledger, keep the state in
// status.alerts and raise what fired (an Event, a metric, a webhook whose
// body this package builds).
package budget
