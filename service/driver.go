package service

import "errors"

// Drivers are one database's drivers, one per area of the services, and
// its Handle. A driver package makes them from an open database.
type Drivers struct {
	// Partners, clients, API keys, stores and sessions.
	Partners PartnerDriver

	// The secret key's check value and the values sealed with it.
	SecretKeys SecretKeyDriver

	// Orders, their events and idempotency keys.
	Orders OrderDriver

	// Uploads, their files and the stock they write.
	Uploads UploadDriver

	// Webhook endpoints and their deliveries.
	Webhooks WebhookDriver

	// The database itself.
	Handle Handle
}

// ErrNotFound is what a driver's row method returns (wrapped or not) when
// the row it is asked for does not exist, so that the services can tell a
// missing row from a failing database without knowing the driver.
var ErrNotFound = errors.New("no such row")

// ErrFull is a driver's answer to a write that a bound it was given
// refuses, such as a client's endpoints at NewEndpoint.Max.
var ErrFull = errors.New("bound reached")
