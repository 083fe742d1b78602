// Package reconciler is the Reconcile shape every modelgate kind shares: get,
// finalizer, ordered steps, conditions computed from their outcomes, one
// status patch.
package reconciler
