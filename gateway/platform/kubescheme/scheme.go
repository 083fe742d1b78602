// Package kubescheme builds the runtime.Scheme every modelgate Kubernetes
// client uses: the core kinds plus modelgate.io/v1alpha1.
package kubescheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// New returns a scheme with the core kinds and modelgate's kinds registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only fail on programming errors (conflicting registrations).
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
