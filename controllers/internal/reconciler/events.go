package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Recorder emits a controller's Events; the zero value (tests that build a
// reconciler by hand) emits nothing.
type Recorder struct{ R events.EventRecorder }

// Normal records a transition; action names what the controller did.
func (e Recorder) Normal(obj runtime.Object, reason, action, note string, args ...any) {
	if e.R != nil {
		e.R.Eventf(obj, nil, corev1.EventTypeNormal, reason, action, note, args...)
	}
}

// Warning records a transition that needs someone's attention.
func (e Recorder) Warning(obj runtime.Object, reason, action, note string, args ...any) {
	if e.R != nil {
		e.R.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, note, args...)
	}
}
