package storelink

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"time"
)

// A version names a thing as it stands, so that a caller can change it
// only if it is still as the caller last saw it (HTTP's ETag and
// If-Match): it is a hash of the thing's fields, and changes whenever one
// of them does. Figures that move on their own (an endpoint's stats, a
// client's capacity, when a key was last used) are not part of it: they
// are counted, not set, and a version that moved with them would refuse
// every change made while the thing is in use.

// Version is the endpoint's version: a hash of every field it shows. A
// change of its secret or API key, which it does not show, moves
// UpdatedAt, which it does.
func (e *Endpoint) Version() string {
	c := *e
	if len(c.States) == 0 {
		c.States = nil
	}
	c.CreatedAt, c.UpdatedAt = versionTime(c.CreatedAt), versionTime(c.UpdatedAt)
	if c.PreviousSecretUntil != nil {
		t := versionTime(*c.PreviousSecretUntil)
		c.PreviousSecretUntil = &t
	}
	if c.DeletedAt != nil {
		t := versionTime(*c.DeletedAt)
		c.DeletedAt = &t
	}
	return versionOf(c)
}

// Version is the client's version as the operator sees it: of the client,
// its stores, its keys (not when they were last used) and its endpoints.
// It leaves out the capacity, which refills with time.
func (c *ClientDetail) Version() string {
	type key struct {
		ID, Prefix string
		CreatedAt  time.Time
	}
	v := struct {
		Client    Client
		Stores    []Store
		Keys      []key
		Endpoints []string
	}{Client: c.Client, Stores: slices.Clone(c.Stores)}
	v.Client.CreatedAt = versionTime(v.Client.CreatedAt)
	for i := range v.Stores {
		v.Stores[i].CreatedAt = versionTime(v.Stores[i].CreatedAt)
	}
	for _, k := range c.APIKeys {
		v.Keys = append(v.Keys, key{k.ID, k.Prefix, versionTime(k.CreatedAt)})
	}
	for i := range c.Endpoints {
		v.Endpoints = append(v.Endpoints, c.Endpoints[i].Version())
	}
	return versionOf(v)
}

// versionTime is t as answers show it: UTC, to the millisecond; the
// database may give it back in another zone or finer.
func versionTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// versionOf hashes v's JSON: 128 bits of SHA-256, in base64url.
func versionOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("storelink: version of an unencodable value: " + err.Error()) // only plain fields are hashed
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// IfMatch is a condition on the version of the thing a call changes, as
// HTTP's If-Match states it: the call changes nothing unless it holds. A
// nil *IfMatch places no condition.
type IfMatch struct {
	// Any holds whenever the thing exists ("*").
	Any bool
	// Versions are the versions the thing may have; one must be its own.
	// None (a header of weak tags only) never holds.
	Versions []string
}

// Check returns EPRECONDITION unless m holds for what, whose version is
// version.
func (m *IfMatch) Check(what, version string) error {
	if m == nil || m.Any || slices.Contains(m.Versions, version) {
		return nil
	}
	return Errorf(EPRECONDITION, "The %s has changed since the version named in If-Match: it is now version %q. Read it again, and send the change with that version if it still applies.", what, version)
}
