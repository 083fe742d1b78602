package bedrock

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// fakeSTS answers AssumeRoleWithWebIdentity (a form POST, unsigned) with
// temporary credentials, as STS's Query API does in XML.
func fakeSTS(t *testing.T, secret, token string, calls *atomic.Int32, got chan<- map[string]string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_ = r.ParseForm()
		select {
		case got <- map[string]string{"Action": r.Form.Get("Action"), "RoleArn": r.Form.Get("RoleArn"),
			"WebIdentityToken": r.Form.Get("WebIdentityToken"), "RoleSessionName": r.Form.Get("RoleSessionName")}:
		default:
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>%s</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:modelgate-system:gateway</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/bedrock/modelgate</Arn><AssumedRoleId>AROAFAKE:modelgate</AssumedRoleId></AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, fakeupstream.BedrockAccessKeyID, secret, token, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestWebIdentity: a backend without a Secret signs with the temporary
// credentials the pod's web identity token is exchanged for at STS; the
// exchange is cached across requests.
func TestWebIdentity(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBedrock()
	defer f.Close()
	f.SetSessionToken("IQoJb3JpZ2luX2VjEFAKE")
	var calls atomic.Int32
	got := make(chan map[string]string, 1)
	sts := fakeSTS(t, f.Key(), "IQoJb3JpZ2luX2VjEFAKE", &calls, got)
	tokenFile := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(tokenFile, []byte("eyJhbGciOiJSUzI1NiJ9.projected.token"), 0o600)).To(Succeed())
	env := map[string]string{envTokenFile: tokenFile, envRoleARN: "arn:aws:iam::123456789012:role/bedrock", envSTSEndpoint: sts.URL}

	p := New(fakeupstream.Client())
	p.identity.getenv = func(k string) string { return env[k] }
	b := upstream.Backend{Name: "irsa", Provider: Name, BaseURL: f.URL, UpstreamModel: "m", Options: map[string]string{OptionRegion: fakeupstream.BedrockRegion}}
	req := upstream.Request{Protocol: upstream.ChatCompletions, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}
	for range 2 {
		res, err := upstream.Invoke(context.Background(), p, b, req)
		g.Expect(err).NotTo(HaveOccurred())
		res.Close()
		g.Expect(f.Last().Rejected).To(BeFalse())
	}
	g.Expect(calls.Load()).To(Equal(int32(1)), "the credentials are cached")
	form := <-got
	g.Expect(form).To(HaveKeyWithValue("Action", "AssumeRoleWithWebIdentity"))
	g.Expect(form).To(HaveKeyWithValue("RoleArn", "arn:aws:iam::123456789012:role/bedrock"))
	g.Expect(form).To(HaveKeyWithValue("WebIdentityToken", "eyJhbGciOiJSUzI1NiJ9.projected.token"))
	g.Expect(form).To(HaveKeyWithValue("RoleSessionName", "modelgate-gateway"))

	// No Secret and no web identity: the backend cannot serve; nothing is
	// sent.
	n := f.Count()
	p = New(fakeupstream.Client())
	p.identity.getenv = func(string) string { return "" }
	_, err := upstream.Invoke(context.Background(), p, b, req)
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.Message).To(ContainSubstring("credentialSecretRef"))
	g.Expect(f.Count()).To(Equal(n))
}
