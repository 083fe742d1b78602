// Package keys makes and recognises secrets: API keys (`sk-` + 48 random
// characters) and tenant access tokens. Only hashes leave this package's callers.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

const (
	// APIKeyPrefix starts every API key.
	APIKeyPrefix = "sk-"
	// APIKeyRandomLength is the contract's 48-character random part.
	APIKeyRandomLength = 48
	// accessTokenLength is the random length of a tenant access token.
	accessTokenLength = 40
	alphabet          = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	displayPrefixLen  = len(APIKeyPrefix) + 4
)

// randomString returns n characters drawn uniformly from alphabet.
// rand.Text would be shorter but its alphabet is base32, not the contract's.
func randomString(n int) (string, error) {
	// Rejection sampling keeps the distribution uniform: 62 does not divide 256.
	const max = 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) < max && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}

// NewAPIKey returns a fresh API key.
func NewAPIKey() (string, error) {
	s, err := randomString(APIKeyRandomLength)
	if err != nil {
		return "", err
	}
	return APIKeyPrefix + s, nil
}

// NewAccessToken returns a fresh tenant access token (not an `sk-` key).
func NewAccessToken() (string, error) {
	return randomString(accessTokenLength)
}

// Hash is the SHA-256 of a secret in lower-case hex: what status and indexes hold.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// DisplayPrefix is a short, non-secret prefix of a key for display ("sk-abcd").
func DisplayPrefix(key string) string {
	if len(key) <= displayPrefixLen {
		return APIKeyPrefix
	}
	return key[:displayPrefixLen]
}

// ValidAPIKey reports whether s has the shape of an API key. Keys supplied
// through a Secret are checked with it so a typo is reported, not stored.
func ValidAPIKey(s string) bool {
	rest, ok := strings.CutPrefix(s, APIKeyPrefix)
	if !ok || len(rest) != APIKeyRandomLength {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(alphabet, rune(rest[i])) {
			return false
		}
	}
	return true
}
