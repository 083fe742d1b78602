// Package controllers holds one reconciler per modelgate kind. Reconcilers are
// thin: load the object, decide with small step functions, write status once.
package controllers
