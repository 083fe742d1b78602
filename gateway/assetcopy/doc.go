// Package assetcopy copies a URL asset under private asset review into the
// blob store: fetched through the guarded dialer, streamed under the
// contract's size caps, and typed by its bytes.
package assetcopy
