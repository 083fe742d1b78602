package credential_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
)

func TestResolve(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "up"},
		Data: map[string][]byte{"key": []byte("sk-1\n"), "blank": []byte("  ")}}
	src := credential.FromReader(fake.NewClientBuilder().WithObjects(secret).Build())
	apiDown := errors.New("api server down")
	for _, c := range []struct {
		name    string
		src     credential.Source
		ref     *v1.SecretKeyRef
		wantKey string
		wantMsg string // an *upstream.Error of class Failover with this message
		wantErr error  // else this error, as is
	}{
		{name: "no reference", src: src},
		{name: "trimmed key", src: src, ref: &v1.SecretKeyRef{Name: "up", Key: "key"}, wantKey: "sk-1"},
		{name: "no secret", src: src, ref: &v1.SecretKeyRef{Name: "gone", Key: "key"},
			wantMsg: `the credential Secret sys/gone of backend "b" does not exist`},
		{name: "no key", src: src, ref: &v1.SecretKeyRef{Name: "up", Key: "other"},
			wantMsg: `the credential Secret sys/up of backend "b" has no key "other"`},
		{name: "blank key", src: src, ref: &v1.SecretKeyRef{Name: "up", Key: "blank"},
			wantMsg: `the credential Secret sys/up of backend "b" has no key "blank"`},
		{name: "api failure", ref: &v1.SecretKeyRef{Name: "up", Key: "key"}, wantErr: apiDown,
			src: func(context.Context, string, string, string) (string, error) { return "", apiDown }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			rb := &v1.Backend{Name: "b", Provider: "openai", BaseURL: "https://up", UpstreamModel: "m",
				TimeoutSeconds: 7, CredentialSecretRef: c.ref}
			b, err := credential.Resolve(context.Background(), c.src, "sys", rb)
			g.Expect(b.Name).To(Equal("b"))
			g.Expect(b.Provider).To(Equal("openai"))
			g.Expect(b.UpstreamModel).To(Equal("m"))
			g.Expect(b.Timeout.Seconds()).To(BeEquivalentTo(7))
			switch {
			case c.wantMsg != "":
				ue, ok := upstream.As(err)
				g.Expect(ok).To(BeTrue(), "%v", err)
				g.Expect(ue.Class).To(Equal(upstream.Failover))
				g.Expect(ue.Retryable).To(BeFalse())
				g.Expect(ue.Message).To(Equal(c.wantMsg))
			case c.wantErr != nil:
				g.Expect(err).To(MatchError(c.wantErr))
				_, ok := upstream.As(err)
				g.Expect(ok).To(BeFalse())
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(b.APIKey).To(Equal(c.wantKey))
			}
		})
	}
}
