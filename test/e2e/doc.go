// Package e2e runs the modelgate binary as a user would and talks to it over
// real HTTP and a real kubeconfig.
package e2e
