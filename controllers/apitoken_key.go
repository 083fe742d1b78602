package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/internal/reconciler"
	"github.com/modelgate/modelgate/gateway/keys"
)

// ensureKey sets status.keyHash from the key the token uses: a hash given in
// the spec, a referenced Secret, or a generated key written once into a
// Secret the token owns. A referenced Secret without a usable key is not
// retried: a change of it, or of the spec, wakes the token.
func (r *ApiTokenReconciler) ensureKey(ctx context.Context, tok *v1.ApiToken) reconciler.Result {
	if tok.Spec.KeyHash != "" { // made by the gateway and shown once; nothing to store
		tok.Status.SecretName = ""
		tok.Status.KeyHash, tok.Status.KeyPrefix = tok.Spec.KeyHash, tok.Spec.KeyPrefix
		return reconciler.Done(v1.ReasonReconciled, "key %s given as a hash", tok.Spec.KeyPrefix)
	}
	if ref := tok.Spec.KeySecretRef; ref != nil {
		key, err := r.readSecretKey(ctx, tok.Namespace, ref.Name, ref.Key)
		switch {
		case err != nil:
			return retryLater(tok, v1.ReasonSecretUnavailable, err)
		case key == "":
			return reconciler.NotDone(v1.ReasonKeyInvalid, "secret %s has no key %q", ref.Name, ref.Key)
		case !keys.ValidAPIKey(key):
			return reconciler.NotDone(v1.ReasonKeyInvalid, "secret %s key %q is not an API key (sk- and 48 letters or digits)", ref.Name, ref.Key)
		}
		r.setKey(tok, ref.Name, key)
		return reconciler.Done(v1.ReasonReconciled, "key %s read from Secret %s", tok.Status.KeyPrefix, ref.Name)
	}
	name := tok.Name + "-key"
	key, err := r.readSecretKey(ctx, tok.Namespace, name, v1.APIKeySecretKey)
	if err != nil {
		return retryLater(tok, v1.ReasonSecretUnavailable, err)
	}
	if key == "" {
		if key, err = r.writeNewKey(ctx, tok, name); err != nil {
			return retryLater(tok, v1.ReasonSecretUnavailable, err)
		}
		recorder{R: r.Events}.Normal(tok, v1.EventKeyProvisioned, "ProvisionKey", "generated a new key into Secret %s", name)
	}
	r.setKey(tok, name, key)
	return reconciler.Done(v1.ReasonReconciled, "key %s generated into Secret %s", tok.Status.KeyPrefix, name)
}

func (r *ApiTokenReconciler) setKey(tok *v1.ApiToken, secret, key string) {
	tok.Status.SecretName = secret
	tok.Status.KeyHash = keys.Hash(key)
	tok.Status.KeyPrefix = keys.DisplayPrefix(key)
}

// readSecretKey returns one value of a Secret, "" when the Secret or key is missing.
func (r *ApiTokenReconciler) readSecretKey(ctx context.Context, ns, name, key string) (string, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("get secret %s: %w", name, err)
	}
	return string(s.Data[key]), nil
}

// writeNewKey creates the token's key Secret. Create (not update) makes the
// write happen once: a racing reconcile gets AlreadyExists and retries.
func (r *ApiTokenReconciler) writeNewKey(ctx context.Context, tok *v1.ApiToken, name string) (string, error) {
	key, err := keys.NewAPIKey()
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tok.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "modelgate"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1.APIKeySecretKey: []byte(key)},
	}
	if err := controllerutil.SetControllerReference(tok, s, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create key secret: %w", err)
	}
	return key, nil
}
