package controllers_test

import (
	"time"

	"encoding/json"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/framework"
)

func k8sJSON(o any) (string, error) {
	b, err := json.Marshal(o)
	return string(b), err
}

// update re-reads obj, applies mutate and writes it, retrying on conflicts
// with the controllers' own status writes.
func update[T client.Object](obj T, mutate func(T)) {
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return k8s.Update(ctx, obj)
	}, framework.Timeout, framework.Interval).Should(Succeed())
}

// expectNotRewritten checks that nothing writes obj (its resourceVersion
// stays) for two and a half of the suite's 1 s sync periods.
func expectNotRewritten(obj client.Object) {
	rv := obj.GetResourceVersion()
	Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(obj.GetResourceVersion()).To(Equal(rv))
	}, 2500*time.Millisecond, 250*time.Millisecond).Should(Succeed())
}
