package webhook

import (
	"strings"
	"time"

	"storelink"
)

// What a partner or the operator gives when registering or changing an
// endpoint is checked here before the service stores it: the API and the
// portal call the same functions, so that a URL or key one refuses the
// other refuses too, with the same words.

// DefaultOverlap is how long, after a secret rotation, deliveries are
// signed with both secrets when no overlap is given: long enough for a
// partner to deploy the new one.
const DefaultOverlap = 24 * time.Hour

// MaxOverlap is the longest overlap a rotation takes.
const MaxOverlap = 30 * 24 * time.Hour

// CheckNewEndpoint trims the URL of n and checks it (ValidateURL, with
// allowPrivate) and its api_key (ValidateAPIKey). The service checks the
// states and the description.
func CheckNewEndpoint(n *storelink.NewEndpoint, allowPrivate bool) error {
	n.URL = strings.TrimSpace(n.URL)
	if err := ValidateURL(n.URL, allowPrivate); err != nil {
		return err
	}
	return ValidateAPIKey(n.APIKey)
}

// CheckEndpointPatch is CheckNewEndpoint for the fields a change sets.
func CheckEndpointPatch(p *storelink.EndpointPatch, allowPrivate bool) error {
	if p.URL != nil {
		u := strings.TrimSpace(*p.URL)
		p.URL = &u
		if err := ValidateURL(u, allowPrivate); err != nil {
			return err
		}
	}
	if p.APIKey != nil {
		return ValidateAPIKey(*p.APIKey)
	}
	return nil
}

// ParseOverlap reads a rotation's overlap, a Go duration such as 24h: ""
// is DefaultOverlap, and it is at most MaxOverlap.
func ParseOverlap(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultOverlap, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxOverlap {
		return 0, storelink.Errorf(storelink.EUNPROCESSABLE, "overlap must be a duration such as 24h, at most %s.", hours(MaxOverlap))
	}
	return d, nil
}

// hours writes a whole number of hours as Go does, without the zero
// minutes and seconds: 720h.
func hours(d time.Duration) string {
	return strings.TrimSuffix(d.Truncate(time.Hour).String(), "0m0s")
}
