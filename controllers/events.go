package controllers

import "github.com/modelgate/modelgate/controllers/internal/reconciler"

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// recorder emits Events for a controller (reconciler.Recorder).
type recorder = reconciler.Recorder
