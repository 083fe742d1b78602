// Package pricing is the one place where modelgate turns published PriceRules
// into money: it selects the rule that prices a request, evaluates a charge
// (or a reservation estimate) exactly in decimals and converts it to quota
// once with billing.QuotaFromUSD, and builds the GET /v1/pricing catalog.
//
// Everything here is a pure function of its inputs (PriceRule and ModelRoute
// objects as the informer cache holds them, request facts, measured usage and
// an instant): no Kubernetes client, no database, no clock. docs/pricing.md
// describes the rules and formulas.
//
// Typical use on the billing path:
//
//	table := pricing.NewTable(systemNamespace, cachedRules) // rebuilt when the cache changes
//	rule, err := table.Select(tenantNamespace, model, group, pricing.Facts{Resolution: "1080p"})
//	reserve, err := rule.EstimateText(bodyBytes, maxTokens, acceptedAt)
//	charge, err := rule.Charge(usage, acceptedAt)
package pricing
