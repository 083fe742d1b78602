package bedrock

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// The environment of a pod with an IAM role for its service account (EKS
// IRSA): the projected token file and the role to assume with it. The STS
// endpoint can be moved with the SDK's AWS_ENDPOINT_URL_STS.
const (
	envTokenFile   = "AWS_WEB_IDENTITY_TOKEN_FILE"
	envRoleARN     = "AWS_ROLE_ARN"
	envSessionName = "AWS_ROLE_SESSION_NAME"
	envSTSEndpoint = "AWS_ENDPOINT_URL_STS"
)

// webIdentity holds the pod's web-identity credentials, one cached
// provider per region (STS is regional): the SDK's provider exchanges the
// token for temporary credentials and the cache renews them before they
// expire, so a request pays for STS only once an hour.
type webIdentity struct {
	client *http.Client
	getenv func(string) string

	mu        sync.Mutex
	providers map[string]*aws.CredentialsCache
}

func newWebIdentity(c *http.Client) *webIdentity {
	return &webIdentity{client: c, getenv: os.Getenv, providers: map[string]*aws.CredentialsCache{}}
}

func (w *webIdentity) retrieve(ctx context.Context, b upstream.Backend, region string) (aws.Credentials, error) {
	p, err := w.provider(region)
	if err != nil {
		return aws.Credentials{}, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true,
			Message: fmt.Sprintf("backend %q (bedrock) has no credential: give it a credentialSecretRef, or run the gateway with a web identity (%s and %s)", b.Name, envTokenFile, envRoleARN)}
	}
	creds, err := p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, &upstream.Error{Class: upstream.Failover, Status: http.StatusBadGateway, Retryable: true, Err: err,
			Message: fmt.Sprintf("backend %q (bedrock): assuming the pod's web identity role failed", b.Name)}
	}
	return creds, nil
}

func (w *webIdentity) provider(region string) (*aws.CredentialsCache, error) {
	file, role := w.getenv(envTokenFile), w.getenv(envRoleARN)
	if file == "" || role == "" {
		return nil, fmt.Errorf("no web identity")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.providers[region]; p != nil {
		return p, nil
	}
	opts := sts.Options{Region: region, HTTPClient: w.client}
	if ep := w.getenv(envSTSEndpoint); ep != "" {
		opts.BaseEndpoint = aws.String(ep)
	}
	session := w.getenv(envSessionName)
	if session == "" {
		session = "modelgate-gateway"
	}
	p := aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(sts.New(opts), role, stscreds.IdentityTokenFile(file),
		func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = session }))
	w.providers[region] = p
	return p, nil
}
