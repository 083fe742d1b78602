package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/framework"
)

var (
	env *framework.Env
	k8s client.Client
	ctx = context.Background()
)

func TestAPIValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API validation against a real kube-apiserver")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = framework.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
