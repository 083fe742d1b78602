package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/tokenspec"
)

// Pricing serves GET /v1/pricing: the catalog of image and video prices the
// calling key would pay, customer prices and group ratio included.
type Pricing struct {
	// Cache reads the routes and price rules from the informer cache.
	Cache client.Reader
	// SystemNamespace holds the platform's routes and prices.
	SystemNamespace string
}

// pricingAuthFail answers an authentication failure in the catalog's
// shape; the answer is never cached.
func pricingAuthFail(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Cache-Control", "private, no-store")
	apierr.Pricing(w, status, "invalid_api_key", message)
}

// Catalog answers one page of the catalog. Every answer is private and not
// to be cached.
func (h *Pricing) Catalog(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	w.Header().Set("Cache-Control", "private, no-store")
	ctx := r.Context()
	if g := p.Token.Spec.Group; g != "" && g != auth.AutoGroup && !tokenspec.TenantAllowsGroup(p.Tenant, g) {
		apierr.Pricing(w, http.StatusForbidden, "group_not_allowed", "the key's group is not allowed for this account")
		return
	}
	q, err := pricing.ParseCatalogQuery(r.URL.Query())
	if err != nil {
		apierr.Pricing(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	in, err := h.catalogInput(ctx, p)
	if err != nil {
		log.FromContext(ctx).Error(err, "load customer pricing")
		apierr.Pricing(w, http.StatusServiceUnavailable, "pricing_unavailable",
			"customer pricing cannot be loaded safely right now; retry later")
		return
	}
	page, err := pricing.BuildCatalog(in, q)
	switch {
	case errors.Is(err, pricing.ErrModelNotFound):
		apierr.Pricing(w, http.StatusNotFound, "model_not_found", "model "+q.Model+" is not available to this key")
	case err != nil:
		log.FromContext(ctx).Error(err, "build catalog")
		apierr.Pricing(w, http.StatusServiceUnavailable, "pricing_unavailable", "the price catalog cannot be built safely right now")
	default:
		writeJSON(w, http.StatusOK, page)
	}
}

// TenantCatalog builds one page of the catalog as a key of the tenant with
// automatic group selection and no model allow-list would see it from
// GET /v1/pricing: every group the tenant may use, customer prices and group
// ratios included. The console's prices page shows it.
func (h *Pricing) TenantCatalog(ctx context.Context, tenant *v1.Tenant, q pricing.CatalogQuery) (*pricing.CatalogPage, error) {
	p := &auth.Principal{Token: &v1.ApiToken{Spec: v1.ApiTokenSpec{Group: auth.AutoGroup}}, Tenant: tenant}
	in, err := h.catalogInput(ctx, p)
	if err != nil {
		return nil, err
	}
	return pricing.BuildCatalog(in, q)
}

// catalogInput gathers the routes and rules visible to the key's tenant from the
// cache. A cache that has not synced cannot be trusted to hold the
// customer's prices, so it is an error, never an empty (public) catalog.
func (h *Pricing) catalogInput(ctx context.Context, p *auth.Principal) (pricing.CatalogInput, error) {
	in := pricing.CatalogInput{
		SystemNamespace: h.SystemNamespace, TenantNamespace: p.Tenant.Namespace,
		Groups: p.Groups(), ModelAllowed: p.AllowsModel,
	}
	if syncer, ok := h.Cache.(interface{ WaitForCacheSync(context.Context) bool }); ok {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if !syncer.WaitForCacheSync(sctx) {
			return in, errors.New("informer cache not synced")
		}
	}
	for _, ns := range []string{h.SystemNamespace, p.Tenant.Namespace} {
		routes := &v1.ModelRouteList{}
		if err := h.Cache.List(ctx, routes, client.InNamespace(ns)); err != nil {
			return in, err
		}
		rules := &v1.PriceRuleList{}
		if err := h.Cache.List(ctx, rules, client.InNamespace(ns)); err != nil {
			return in, err
		}
		in.Routes = append(in.Routes, routes.Items...)
		in.Rules = append(in.Rules, rules.Items...)
	}
	return in, nil
}
