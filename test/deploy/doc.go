// Package deploy tests the Helm chart, the kustomize overlays and their RBAC
// against a real kube-apiserver (envtest): every rendered object must pass a
// server-side apply dry run, and the ServiceAccounts' rules are exercised with
// impersonating clients.
package deploy
