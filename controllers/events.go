package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// recorder emits Events for a controller; the zero value (tests that build
// a reconciler by hand) emits nothing.
type recorder struct{ r events.EventRecorder }

// normal records a transition; action names what the controller did.
func (e recorder) normal(obj runtime.Object, reason, action, note string, args ...any) {
	if e.r != nil {
		e.r.Eventf(obj, nil, corev1.EventTypeNormal, reason, action, note, args...)
	}
}

// warning records a transition that needs someone's attention.
func (e recorder) warning(obj runtime.Object, reason, action, note string, args ...any) {
	if e.r != nil {
		e.r.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, note, args...)
	}
}
