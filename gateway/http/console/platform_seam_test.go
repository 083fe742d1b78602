package console

import "net/http"

// PlatformPage is the platform overview as the guard runs it for a platform
// admin named subject: the tests render the page without a sign-in (the
// guard's stand-in admits no one).
func (c *Console) PlatformPage(subject string) http.Handler {
	return c.platformPage(c.platform, subject)
}
