package console

import "net/http"

// platformAdminOf names the platform admin signed in on r. This stand-in
// admits no one: OpenID Connect sign-in supplies the real one, whose
// platform-admin sessions have a subject and no tenant.
func (c *Console) platformAdminOf(r *http.Request) (string, bool) { return "", false }
