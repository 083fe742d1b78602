package keys

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestNewAPIKeyShape(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for range 200 {
		k, err := NewAPIKey()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k).To(HavePrefix("sk-"))
		g.Expect(k).To(HaveLen(3 + 48))
		g.Expect(ValidAPIKey(k)).To(BeTrue())
		g.Expect(seen[k]).To(BeFalse(), "duplicate key")
		seen[k] = true
	}
}

func TestHashAndPrefix(t *testing.T) {
	g := NewWithT(t)
	// SHA-256("abc"), a published test vector.
	g.Expect(Hash("abc")).To(Equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
	g.Expect(DisplayPrefix("sk-abcdefgh")).To(Equal("sk-abcd"))
	g.Expect(DisplayPrefix("sk-")).To(Equal("sk-"))
}

func TestValidAPIKey(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ValidAPIKey("sk-" + strings.Repeat("a", 47))).To(BeFalse())
	g.Expect(ValidAPIKey("pk-" + strings.Repeat("a", 48))).To(BeFalse())
	g.Expect(ValidAPIKey("sk-" + strings.Repeat("-", 48))).To(BeFalse())
	g.Expect(ValidAPIKey("sk-" + strings.Repeat("Z9", 24))).To(BeTrue())
}

func TestAccessTokenIsNotAnAPIKey(t *testing.T) {
	g := NewWithT(t)
	tok, err := NewAccessToken()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok).NotTo(HavePrefix("sk-"))
	g.Expect(tok).To(HaveLen(40))
}
