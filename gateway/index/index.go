// Package index declares every field index of the shared informer cache in one
// place, so the manager, the gateway and every test suite agree on them.
package index

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

const (
	// TokenKeyHash indexes ApiTokens by status.keyHash: the gateway's
	// authentication lookup, with no API-server or database call per request.
	TokenKeyHash = "status.keyHash"
	// TenantAccessTokenHash indexes Tenants by status.accessTokenHash (usage API).
	TenantAccessTokenHash = "status.accessTokenHash"
	// TenantUserID indexes Tenants by status.userID (the X-User-Id header).
	TenantUserID = "status.userID"
	// RouteModel indexes ModelRoutes by spec.model.
	RouteModel = "spec.model"
	// RouteSecretRefs indexes ModelRoutes by the Secrets their backends'
	// credentials name, so a Secret event wakes exactly those routes.
	RouteSecretRefs = "spec.backends.credentialSecretRef.name"
	// TokenSecretRefs indexes ApiTokens by the Secret their keySecretRef
	// names.
	TokenSecretRefs = "spec.keySecretRef.name"
	// PriceModel indexes PriceRules by spec.model.
	PriceModel = "spec.model"
	// TaskID indexes GenerationTasks by spec.taskID.
	TaskID = "spec.taskID"
	// TaskClientBusinessID indexes GenerationTasks by spec.clientBusinessID.
	TaskClientBusinessID = "spec.clientBusinessID"
	// TaskUploadRefs indexes unfinished GenerationTasks by the upload IDs
	// their request names, so the upload sweeper never deletes a file a
	// live task will still read.
	TaskUploadRefs = "spec.request.uploads"
)

// uploadID matches the IDs POST /v1/uploads/* gives ("upl_" and 128 random
// bits in hex); a signed upload URL carries it in its path.
var uploadID = regexp.MustCompile(`upl_[0-9a-f]{32}`)

// liveUploadRefs lists the distinct upload IDs in an unfinished task's request.
func liveUploadRefs(t *v1.GenerationTask) []string {
	if t.Status.Phase == v1.TaskCompleted || t.Status.Phase == v1.TaskFailed {
		return nil
	}
	var out []string
	for _, id := range uploadID.FindAll(t.Spec.Request.Raw, -1) {
		if !slices.Contains(out, string(id)) {
			out = append(out, string(id))
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// tokenKeyHashes indexes a token by its status hash and, for tokens made by
// POST /v1/tokens, by its spec hash too, so a new key works as soon as the
// gateway's cache sees the object, before the controller has run.
func tokenKeyHashes(t *v1.ApiToken) []string {
	switch {
	case t.Spec.KeyHash != "" && t.Status.KeyHash != "" && t.Spec.KeyHash != t.Status.KeyHash:
		return []string{t.Spec.KeyHash, t.Status.KeyHash}
	case t.Spec.KeyHash != "":
		return []string{t.Spec.KeyHash}
	default:
		return nonEmpty(t.Status.KeyHash)
	}
}

// routeSecretRefs lists the distinct Secrets a route's backends name.
func routeSecretRefs(r *v1.ModelRoute) []string {
	var out []string
	for _, b := range r.Spec.Backends {
		if ref := b.CredentialSecretRef; ref != nil && ref.Name != "" && !slices.Contains(out, ref.Name) {
			out = append(out, ref.Name)
		}
	}
	return out
}

// AddIndexes registers every index with the indexer (a manager's field indexer).
func AddIndexes(ctx context.Context, ix client.FieldIndexer) error {
	indexes := []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&v1.ApiToken{}, TokenKeyHash, func(o client.Object) []string { return tokenKeyHashes(o.(*v1.ApiToken)) }},
		{&v1.Tenant{}, TenantAccessTokenHash, func(o client.Object) []string {
			return nonEmpty(o.(*v1.Tenant).Status.AccessTokenHash)
		}},
		{&v1.Tenant{}, TenantUserID, func(o client.Object) []string {
			if id := o.(*v1.Tenant).Status.UserID; id != 0 {
				return []string{fmt.Sprint(id)}
			}
			return nil
		}},
		{&v1.ModelRoute{}, RouteModel, func(o client.Object) []string {
			return nonEmpty(string(o.(*v1.ModelRoute).Spec.Model))
		}},
		{&v1.ModelRoute{}, RouteSecretRefs, func(o client.Object) []string { return routeSecretRefs(o.(*v1.ModelRoute)) }},
		{&v1.ApiToken{}, TokenSecretRefs, func(o client.Object) []string {
			if ref := o.(*v1.ApiToken).Spec.KeySecretRef; ref != nil {
				return nonEmpty(ref.Name)
			}
			return nil
		}},
		{&v1.PriceRule{}, PriceModel, func(o client.Object) []string {
			return nonEmpty(string(o.(*v1.PriceRule).Spec.Model))
		}},
		{&v1.GenerationTask{}, TaskID, func(o client.Object) []string {
			return nonEmpty(o.(*v1.GenerationTask).Spec.TaskID)
		}},
		{&v1.GenerationTask{}, TaskClientBusinessID, func(o client.Object) []string {
			return nonEmpty(o.(*v1.GenerationTask).Spec.ClientBusinessID)
		}},
		{&v1.GenerationTask{}, TaskUploadRefs, func(o client.Object) []string {
			return liveUploadRefs(o.(*v1.GenerationTask))
		}},
	}
	for _, i := range indexes {
		if err := ix.IndexField(ctx, i.obj, i.field, i.fn); err != nil {
			return fmt.Errorf("index %T %s: %w", i.obj, i.field, err)
		}
	}
	return nil
}
