package routing

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

func TestPickDefault(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	route := func(name string, typ v1.ModelType, def bool, created time.Time) v1.ModelRoute {
		return v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: v1.ModelRouteSpec{Model: v1.ModelID(name), Type: typ, DefaultModel: def}}
	}
	deleting := route("old-deleting", v1.ModelTypeImage, true, t0.Add(-time.Hour))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	routes := []v1.ModelRoute{
		route("young", v1.ModelTypeImage, true, t0.Add(time.Minute)),
		route("not-default", v1.ModelTypeImage, false, t0.Add(-2*time.Hour)),
		route("b-same-age", v1.ModelTypeImage, true, t0),
		route("a-same-age", v1.ModelTypeImage, true, t0),
		route("video", v1.ModelTypeVideo, true, t0.Add(-3*time.Hour)),
		deleting,
	}
	cases := []struct {
		typ  v1.ModelType
		want string
	}{
		{v1.ModelTypeImage, "a-same-age"}, // oldest live default; a tie goes to the first name
		{v1.ModelTypeVideo, "video"},
		{v1.ModelTypeAudio, ""},
	}
	for _, c := range cases {
		got := ""
		if rt := PickDefault(routes, c.typ); rt != nil {
			got = rt.Name
		}
		if got != c.want {
			t.Errorf("PickDefault(%s) = %q, want %q", c.typ, got, c.want)
		}
	}
}
