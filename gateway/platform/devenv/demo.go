package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Info is what `modelgate dev` writes to dev.json: everything a script or a
// test needs to call the running system.
type Info struct {
	GatewayURL       string `json:"gatewayURL"`
	Kubeconfig       string `json:"kubeconfig"`
	Database         string `json:"database"`
	SystemNamespace  string `json:"systemNamespace"`
	TenantNamespace  string `json:"tenantNamespace"`
	TenantName       string `json:"tenantName"`
	UserID           int64  `json:"userID"`
	TokenName        string `json:"tokenName"`
	TokenID          int64  `json:"tokenID"`
	APIKey           string `json:"apiKey"`
	UsageAccessToken string `json:"usageAccessToken"`
}

// Complete reports which fields are still empty.
func (i Info) Missing() []string {
	var m []string
	for name, empty := range map[string]bool{
		"gatewayURL": i.GatewayURL == "", "kubeconfig": i.Kubeconfig == "", "database": i.Database == "",
		"tenantNamespace": i.TenantNamespace == "", "userID": i.UserID == 0, "tokenID": i.TokenID == 0,
		"apiKey": i.APIKey == "", "usageAccessToken": i.UsageAccessToken == "",
	} {
		if empty {
			m = append(m, name)
		}
	}
	return m
}

// WaitForDemo waits until the first Tenant and the first ApiToken of the
// applied samples are ready, and reads the demo key and access token from
// the Secrets the controllers wrote.
func WaitForDemo(ctx context.Context, c client.Client, applied []*unstructured.Unstructured) (Info, error) {
	tenant, token := first(applied, "Tenant"), first(applied, "ApiToken")
	if tenant == nil || token == nil {
		return Info{}, errors.New("the samples need a Tenant and an ApiToken")
	}
	var info Info
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		t := &v1.Tenant{}
		k := &v1.ApiToken{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tenant), t); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(token), k); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if !meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady) ||
			!meta.IsStatusConditionTrue(k.Status.Conditions, v1.ConditionReady) {
			return false, nil
		}
		access, err := secretValue(ctx, c, t.Namespace, t.Status.AccessTokenSecretName, "token")
		if err != nil {
			return false, err
		}
		key, err := secretValue(ctx, c, k.Namespace, k.Status.SecretName, "key")
		if err != nil {
			return false, err
		}
		info = Info{
			TenantNamespace: t.Namespace, TenantName: t.Name, UserID: t.Status.UserID,
			TokenName: k.Name, TokenID: k.Status.TokenID, APIKey: key, UsageAccessToken: access,
		}
		return true, nil
	})
	if err != nil {
		return Info{}, fmt.Errorf("wait for the demo tenant and key to be ready: %w", err)
	}
	return info, nil
}

func first(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

func secretValue(ctx context.Context, c client.Client, ns, name, key string) (string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return "", fmt.Errorf("read secret %s/%s: %w", ns, name, err)
	}
	return string(s.Data[key]), nil
}

// WriteInfo writes dev.json readable by the owner only: it holds secrets.
func WriteInfo(path string, info Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// Banner is the short text `modelgate dev` prints once the system is up.
func Banner(i Info, infoPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nmodelgate is up (Ctrl-C stops it; state is kept for the next run)\n\n")
	fmt.Fprintf(&b, "  gateway      %s\n", i.GatewayURL)
	fmt.Fprintf(&b, "  tenant       %s (user ID %d)\n", i.TenantNamespace, i.UserID)
	fmt.Fprintf(&b, "  API key      %s\n", i.APIKey)
	fmt.Fprintf(&b, "  console      %s/console/ (sign in with user ID %d and access token %s)\n", i.GatewayURL, i.UserID, i.UsageAccessToken)
	fmt.Fprintf(&b, "  details      %s\n\n", infoPath)
	fmt.Fprintf(&b, "Try:\n")
	fmt.Fprintf(&b, "  curl -s %s/v1/messages -H 'x-api-key: %s' -H 'content-type: application/json' \\\n", i.GatewayURL, i.APIKey)
	fmt.Fprintf(&b, "       -d '{\"model\":\"sim-chat\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n")
	fmt.Fprintf(&b, "  curl -s %s/v1/models -H 'Authorization: Bearer %s'\n", i.GatewayURL, i.APIKey)
	fmt.Fprintf(&b, "  curl -s %s/v1/user/balance -H 'Authorization: Bearer %s'\n", i.GatewayURL, i.APIKey)
	fmt.Fprintf(&b, "  curl -s \"%s/api/usage/tokens/requests?start_timestamp=$(( $(date +%%s) - 3600 ))&end_timestamp=$(( $(date +%%s) + 60 ))\" \\\n", i.GatewayURL)
	fmt.Fprintf(&b, "       -H 'Authorization: Bearer %s' -H 'X-User-Id: %d'\n", i.UsageAccessToken, i.UserID)
	fmt.Fprintf(&b, "  kubectl --kubeconfig %s get tenants,apitokens,modelroutes,pricerules -A\n", i.Kubeconfig)
	fmt.Fprintf(&b, "  kubectl --kubeconfig %s explain apitoken.spec\n\n", i.Kubeconfig)
	return b.String()
}
