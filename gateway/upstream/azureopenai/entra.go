package azureopenai

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

// The authentication options of a backend.
const (
	// OptionAuth chooses the credential: AuthAPIKey (or empty) sends the
	// Secret's value as api-key, AuthEntraID a Microsoft Entra ID token as
	// Authorization: Bearer.
	OptionAuth = "auth"
	// OptionAuthorityHost replaces Microsoft Entra ID's authority host
	// (https://login.microsoftonline.com/) for a sovereign or private cloud;
	// instance discovery is then skipped, so it must be a host the platform
	// trusts.
	OptionAuthorityHost = "authorityHost"
)

// The values of OptionAuth.
const (
	AuthAPIKey  = "api-key"
	AuthEntraID = "entra-id"
)

// The keys of an Entra ID credential Secret beside the client secret
// (which credentialSecretRef names).
const (
	KeyTenantID = "tenantId"
	KeyClientID = "clientId"
)

// Scope is the scope Entra ID tokens for Azure OpenAI are asked for.
const Scope = "https://cognitiveservices.azure.com/.default"

// tokenTimeout bounds one token request of a call whose own context has no
// earlier deadline.
const tokenTimeout = 30 * time.Second

// maxCredentials bounds the cached credentials: rotated secrets leave their
// old entries behind, and the cache starts afresh past this many.
const maxCredentials = 1024

// entra caches one azidentity credential per service principal (or the
// pod's workload identity) and authority, so that every backend with the
// same identity shares its token; azidentity keeps the token in memory and
// asks for a new one shortly before it expires.
type entra struct {
	// client sends the token requests.
	client *http.Client

	mu    sync.Mutex
	creds map[[sha256.Size]byte]azcore.TokenCredential
}

// newEntra sends token requests with client, or (nil) with a client of its
// own on transport.
func newEntra(client *http.Client, transport http.RoundTripper) *entra {
	if client == nil {
		client = &http.Client{Transport: transport, Timeout: tokenTimeout}
	}
	return &entra{client: client, creds: map[[sha256.Size]byte]azcore.TokenCredential{}}
}

// Auth is backend b's authentication: its auth option, else api-key.
func Auth(b upstream.Backend) string {
	if a := strings.TrimSpace(b.Options[OptionAuth]); a != "" {
		return a
	}
	return AuthAPIKey
}

// principal is the identity a backend's token is asked for.
type principal struct {
	tenant, client, secret string
	workload               bool
}

// principal reads backend b's service principal from its Secret: the
// client secret is the value credentialSecretRef names, the tenant and
// client IDs the Secret's tenantId and clientId. Without a Secret it is the
// pod's workload identity (AZURE_TENANT_ID, AZURE_CLIENT_ID,
// AZURE_FEDERATED_TOKEN_FILE).
func principalOf(ctx context.Context, b upstream.Backend) (principal, error) {
	if b.APIKey == "" {
		return principal{workload: true}, nil
	}
	if b.SecretKey == nil {
		return principal{}, credentialError(b, "has no "+KeyTenantID+" and "+KeyClientID+" beside the client secret", nil)
	}
	var p principal
	for _, k := range []struct {
		name string
		to   *string
	}{{KeyTenantID, &p.tenant}, {KeyClientID, &p.client}} {
		v, err := b.SecretKey(ctx, k.name)
		switch {
		case errors.Is(err, credential.ErrNoKey), errors.Is(err, credential.ErrNoSecret):
			return principal{}, credentialError(b, "has no key "+k.name, err)
		case err != nil:
			return principal{}, credentialError(b, "could not be read", err)
		}
		*k.to = v
	}
	p.secret = b.APIKey
	return p, nil
}

func (p principal) key(authority string) [sha256.Size]byte {
	if p.workload {
		return sha256.Sum256([]byte("workload\x00" + authority))
	}
	return sha256.Sum256([]byte(p.tenant + "\x00" + p.client + "\x00" + p.secret + "\x00" + authority))
}

// credential returns backend b's cached credential, built on first use.
func (e *entra) credential(ctx context.Context, b upstream.Backend) (azcore.TokenCredential, [sha256.Size]byte, error) {
	p, err := principalOf(ctx, b)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	authority := strings.TrimSpace(b.Options[OptionAuthorityHost])
	key := p.key(authority)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.creds[key]; ok {
		return c, key, nil
	}
	opts := azcore.ClientOptions{Transport: e.client}
	if authority != "" {
		opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: authority}
	}
	var c azcore.TokenCredential
	if p.workload {
		c, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: authority != ""})
		if err != nil {
			return nil, key, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
				Message: fmt.Sprintf("backend %q (azure-openai) has no credential: give it a credentialSecretRef to a service principal's client secret, or run the gateway with a workload identity (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE)", b.Name)}
		}
	} else {
		c, err = azidentity.NewClientSecretCredential(p.tenant, p.client, p.secret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: authority != ""})
		if err != nil {
			// Malformed tenant ID or authority host; the message names
			// neither secret.
			return nil, key, credentialError(b, "is not a usable service principal", err)
		}
	}
	if len(e.creds) >= maxCredentials {
		clear(e.creds)
	}
	e.creds[key] = c
	return c, key, nil
}

// token returns a bearer token for backend b.
func (e *entra) token(ctx context.Context, b upstream.Backend) (string, [sha256.Size]byte, error) {
	c, key, err := e.credential(ctx, b)
	if err != nil {
		return "", key, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tokenTimeout)
		defer cancel()
	}
	tok, err := c.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Scope}})
	if err != nil {
		if ctx.Err() != nil {
			return "", key, ctx.Err()
		}
		var afe *azidentity.AuthenticationFailedError
		if errors.As(err, &afe) && afe.RawResponse != nil {
			return "", key, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
				Message: fmt.Sprintf("backend %q (azure-openai): Microsoft Entra ID refused the credential (%s)", b.Name, afe.RawResponse.Status)}
		}
		// No answer from Entra ID (unreachable, or a workload identity
		// whose token file cannot be read): azidentity's first line says
		// which.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return "", key, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
			Message: fmt.Sprintf("backend %q (azure-openai): no Microsoft Entra ID token could be had (%s)", b.Name, msg)}
	}
	return tok.Token, key, nil
}

// forget drops a cached credential, so that the next call asks for a new
// token rather than the one Azure refused.
func (e *entra) forget(key [sha256.Size]byte) {
	e.mu.Lock()
	delete(e.creds, key)
	e.mu.Unlock()
}

// credentialError is a backend whose credential Secret cannot give a
// token: another backend may serve.
func credentialError(b upstream.Backend, what string, err error) *upstream.Error {
	return &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
		Message: fmt.Sprintf("the credential Secret of backend %q (azure-openai) %s", b.Name, what)}
}
