//go:build !linux

package devenv

const parentDeathSupported = false

func execWithParentDeath(string, []string) error { return nil }
