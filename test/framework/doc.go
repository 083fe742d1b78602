// Package framework starts the real test control plane (envtest: etcd and
// kube-apiserver built by hack/tools.sh) with modelgate's CRDs installed, and
// holds the timeouts and helpers every suite shares.
package framework
