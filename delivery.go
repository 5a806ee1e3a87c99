package storelink

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Endpoint is a partner URL that receives a client's order events and,
// when its states name EventUploadFinished, the ends of its uploads.
type Endpoint struct {
	ID       string       `json:"endpoint_id"`
	ClientID string       `json:"client_id"`
	URL      string       `json:"url"`
	States   []OrderState `json:"states"` // empty: every order state
	Enabled  bool         `json:"enabled"`
	// Description is the partner's own note on the endpoint ("" for none).
	Description string `json:"description,omitempty"`
	// HasAPIKey tells whether an x-api-key is sent; the key is not shown.
	HasAPIKey bool `json:"has_api_key"`
	// DisabledReason says why the service disabled the endpoint (410 Gone).
	DisabledReason string `json:"disabled_reason,omitempty"`
	// PreviousSecretUntil is the end of a secret rotation's overlap, during
	// which deliveries are signed with the old and the new secret.
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
	// DeletedAt is when the endpoint was deleted: nothing is sent to it
	// any more, and it is kept only so that its history can be read.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// Wants tells whether the endpoint takes events of state s: an order
// state it names, or any when it names none; EventUploadFinished only when
// it names it.
func (e *Endpoint) Wants(s OrderState) bool {
	if s == EventUploadFinished {
		return e.Enabled && slices.Contains(e.States, s)
	}
	return e.Enabled && (len(e.States) == 0 || slices.Contains(e.States, s))
}

// NewEndpoint registers an endpoint.
type NewEndpoint struct {
	URL         string       `json:"url"`
	APIKey      string       `json:"api_key,omitempty"`
	States      []OrderState `json:"states,omitempty"`
	Description string       `json:"description,omitempty"`
}

// EndpointPatch changes an endpoint; nil fields stay as they are.
type EndpointPatch struct {
	URL     *string       `json:"url,omitempty"`
	Enabled *bool         `json:"enabled,omitempty"`
	States  *[]OrderState `json:"states,omitempty"`
	APIKey  *string       `json:"api_key,omitempty"`
	// Description "" removes the note.
	Description *string `json:"description,omitempty"`
	// IfMatch, when set, is the condition the change is made on (HTTP's
	// If-Match); it is checked with the endpoint locked, so that two
	// changes made on the same version cannot both be made.
	IfMatch *IfMatch `json:"-"`
}

// SecretRotation is a new secret for an endpoint: Secret signs from now
// on, and the secret it replaces signs beside it until Overlap has passed.
type SecretRotation struct {
	Secret  string
	Overlap time.Duration
}

// MaxDescription is the longest endpoint description, in characters.
const MaxDescription = 200

// CheckDescription checks an endpoint's description: at most
// MaxDescription characters of UTF-8 text, without control or invisible
// characters (it is shown in the portal and the dashboard).
func CheckDescription(d string) error {
	switch {
	case !utf8.ValidString(d):
		return Errorf(EUNPROCESSABLE, "description is not valid UTF-8.")
	case utf8.RuneCountInString(d) > MaxDescription:
		return Errorf(EUNPROCESSABLE, "description is %d characters long; at most %d are allowed.", utf8.RuneCountInString(d), MaxDescription)
	case strings.IndexFunc(d, unicode.IsControl) >= 0:
		return Errorf(EUNPROCESSABLE, "description holds a control character (a line break, a tab…).")
	}
	if p := InvisibleProblem(d); p != "" {
		return Errorf(EUNPROCESSABLE, "description %s.", p)
	}
	return nil
}

// EndpointSecret is an endpoint with its signing secret: the answer to
// creating an endpoint or rotating its secret, the only times it is shown.
type EndpointSecret struct {
	Endpoint
	Secret string `json:"secret"`
}

// CheckStates checks an endpoint's states against EndpointStates.
func CheckStates(states []OrderState) error {
	for _, s := range states {
		if !slices.Contains(EndpointStates, s) {
			return Errorf(EUNPROCESSABLE, "states: %q is neither an order state nor an event an endpoint can ask for (one of %s).", s, joinStates(EndpointStates))
		}
	}
	return nil
}

func joinStates(ss []OrderState) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// DeliveryState is where the delivery of one event to one endpoint stands.
type DeliveryState string

const (
	// DeliveryPending: not yet through; an attempt is due at NextAttemptAt.
	DeliveryPending DeliveryState = "pending"
	// DeliverySucceeded: the endpoint answered 2xx in time.
	DeliverySucceeded DeliveryState = "succeeded"
	// DeliveryFailed: the retry schedule is spent; it can be redelivered.
	DeliveryFailed DeliveryState = "failed"
	// DeliveryCancelled: its endpoint was deleted while it was pending;
	// it is never sent again.
	DeliveryCancelled DeliveryState = "cancelled"
)

// DeliveryStates lists the four delivery states.
var DeliveryStates = []DeliveryState{DeliveryPending, DeliverySucceeded, DeliveryFailed, DeliveryCancelled}

// Attempt is one try to deliver an event, as recorded.
type Attempt struct {
	Number     int       `json:"number"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	// Response is a bounded excerpt of the answer's body.
	Response string `json:"response,omitempty"`
	// URL is where the attempt went (the endpoint's URL at the time, with
	// ${eventId} replaced); empty for attempts recorded before it was kept.
	URL string `json:"url,omitempty"`
}

// Delivery is the delivery of one event to one endpoint, with its attempts.
type Delivery struct {
	ID         string `json:"delivery_id"`
	EventID    string `json:"event_id"`
	EndpointID string `json:"endpoint_id"`
	ClientID   string `json:"client_id"`
	// OrderID is the order of an order event's delivery, UploadID the
	// upload of an EventUploadFinished's; the other is empty.
	OrderID       string        `json:"order_id,omitempty"`
	UploadID      string        `json:"upload_id,omitempty"`
	EventState    OrderState    `json:"event_state"`
	State         DeliveryState `json:"state"`
	NextAttemptAt *time.Time    `json:"next_attempt_at,omitempty"`
	Attempts      []Attempt     `json:"attempts"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

// DeliveryFilter selects deliveries, newest first; Before is a delivery id.
// A Before that is no delivery of ClientID (when set) is EINVALID.
type DeliveryFilter struct {
	ClientID   string
	EndpointID string
	State      DeliveryState
	// OrderID, OrderNumber and EventID, when set, select the deliveries
	// of that order's events (an order number of ClientID's, when set) or
	// of that one event.
	OrderID     string
	OrderNumber string
	EventID     string
	Limit       int
	Before      string
}

// MaxFilterValue is the longest value a listing of deliveries takes as a
// filter: ids are 36 bytes, and order numbers at most 64 characters.
const MaxFilterValue = 128

// CheckValues refuses a filter value longer than MaxFilterValue, naming it
// as the API's query parameter does.
func (f DeliveryFilter) CheckValues() error {
	for _, v := range []struct{ name, value string }{{"endpoint_id", f.EndpointID}, {"order_id", f.OrderID},
		{"order_number", f.OrderNumber}, {"event_id", f.EventID}} {
		if len(v.value) > MaxFilterValue {
			return Errorf(EINVALID, "%s is %d bytes long; at most %d are allowed.", v.name, len(v.value), MaxFilterValue)
		}
	}
	return nil
}

// DeliveryJob is a claimed delivery with all that its attempt needs.
type DeliveryJob struct {
	DeliveryID string
	EventID    string
	EndpointID string
	Attempt    int // the number of this attempt among all, from 1
	// Try is the number of this attempt since the delivery was created or
	// redelivered: the step of the retry schedule.
	Try    int
	URL    string
	APIKey string
	// Secrets are the whsec_ secrets to sign with: the current one, and the
	// previous one while a rotation's overlap lasts.
	Secrets []string
	Body    []byte
	Owner   string
	// Unsealable says why the endpoint's secret or key could not be opened
	// with the service's secret key; then the event is not sent, and this
	// is the attempt's error. Only that endpoint's deliveries are held up.
	Unsealable string
}

// UnsealableReason is the error of an attempt that was not made because the
// endpoint's stored secret or key cannot be opened: written for the partner,
// who sees it among the delivery's attempts, and for the operator, who must
// act.
const UnsealableReason = "not sent: the endpoint's stored signing secret or api key cannot be opened with the service's secret key; " +
	"the operator must rotate the endpoint's secret (or set its api_key again)"

// Outcome is what an attempt means for its delivery.
type Outcome int

const (
	// OutcomeSucceeded: 2xx within the timeout.
	OutcomeSucceeded Outcome = iota
	// OutcomeRetry: failed; try again at NextAt.
	OutcomeRetry
	// OutcomeFailed: failed, and the schedule is spent.
	OutcomeFailed
	// OutcomeGone: the endpoint answered 410; it is disabled and its
	// deliveries wait until it is enabled again, unless it was changed
	// (enabled again) after the attempt began.
	OutcomeGone
)

// outcomeWords are the outcomes as logs and metrics name them.
var outcomeWords = [...]string{OutcomeSucceeded: "succeeded", OutcomeRetry: "retry", OutcomeFailed: "failed", OutcomeGone: "gone"}

// String names the outcome in a word: succeeded, retry, failed or gone.
func (o Outcome) String() string {
	if int(o) >= 0 && int(o) < len(outcomeWords) {
		return outcomeWords[o]
	}
	return "unknown"
}

// MarshalText makes logs and JSON name the outcome in a word, not its
// number.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Outcomes are every outcome, in order.
var Outcomes = []Outcome{OutcomeSucceeded, OutcomeRetry, OutcomeFailed, OutcomeGone}

// AttemptResult is the recorded end of one claimed attempt.
type AttemptResult struct {
	Job     *DeliveryJob
	Attempt Attempt
	Outcome Outcome
	NextAt  time.Time // for OutcomeRetry
}

// RetryPolicy decides when a failed attempt is tried again.
type RetryPolicy struct {
	// Schedule is the delay after the first failed attempt, the second, and
	// so on; when it is spent the delivery has failed.
	Schedule []time.Duration
	// Jitter is the most a delay is moved either way, as a fraction (0.2).
	Jitter float64
}

// Next returns when attempt number n (from 1) that failed is retried, or
// false when it was the last. A Retry-After longer than the delay wins.
func (p RetryPolicy) Next(n int, retryAfter time.Duration, now time.Time) (time.Time, bool) {
	if n < 1 || n > len(p.Schedule) {
		return time.Time{}, false
	}
	d := p.Schedule[n-1]
	if p.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*rand.Float64()-1)))
	}
	return now.Add(max(d, retryAfter)), true
}

// WebhookService keeps endpoints and deliveries: the calls that manage and
// show them, and the deliverers' queue.
type WebhookService interface {
	EndpointService
	DeliveryQueue
}

// EndpointService keeps a client's endpoints and shows their deliveries.
//
// Errors: ENOTFOUND for an unknown client, endpoint or delivery;
// EUNPROCESSABLE for a state filter outside the six states.
type EndpointService interface {
	// CreateEndpoint registers an endpoint with its signing secret (made by
	// the caller, kept sealed).
	CreateEndpoint(ctx context.Context, clientID string, n NewEndpoint, secret string) (*Endpoint, error)
	// Endpoints lists the endpoints of the clients that are not deleted,
	// oldest first, in one read however many clients are asked.
	Endpoints(ctx context.Context, clientIDs ...string) ([]Endpoint, error)
	Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// Redeliver makes a delivery pending again, due now.
	Redeliver(ctx context.Context, deliveryID string) error
	// PendingDeliveries counts pending deliveries and the age of the oldest.
	PendingDeliveries(ctx context.Context) (int, time.Duration, error)
	// FailedDeliveries counts the deliveries that failed (their schedule
	// spent) and were not sent again since.
	FailedDeliveries(ctx context.Context) (int, error)

	// The calls below take a clientID: "" for the operator, who sees
	// every client's; a partner's own client id otherwise, and then an
	// endpoint or delivery of another client is ENOTFOUND, as if it did
	// not exist.

	// Endpoint returns an endpoint, deleted or not, with its stats.
	Endpoint(ctx context.Context, clientID, id string) (*EndpointDetail, error)
	// EndpointDetails lists a client's endpoints that are not deleted,
	// oldest first, each with its stats.
	EndpointDetails(ctx context.Context, clientID string) ([]EndpointDetail, error)
	// ClientEndpoints is a page of EndpointDetails, as the operator's lists
	// page. ENOTFOUND for an unknown client; EINVALID for a limit below 1
	// or an after that is not a cursor of this list.
	ClientEndpoints(ctx context.Context, f EndpointFilter) (*EndpointPage, error)
	// RedeliverFor is Redeliver of a delivery of clientID's. ECONFLICT
	// when the delivery's endpoint was deleted.
	RedeliverFor(ctx context.Context, clientID, deliveryID string) error
	// TestDelivery makes the job of a test send to the endpoint: a new
	// example event of the state (StateAssigned when none), signed as the
	// endpoint's deliveries are, stored nowhere. ECONFLICT for a deleted
	// endpoint; EUNPROCESSABLE for a state outside the six.
	TestDelivery(ctx context.Context, clientID, endpointID string, state OrderState) (*DeliveryJob, error)

	// UpdateEndpoint changes what p sets. ECONFLICT for a deleted
	// endpoint; EPRECONDITION when p.IfMatch does not hold.
	UpdateEndpoint(ctx context.Context, clientID, id string, p EndpointPatch) (*Endpoint, error)
	// RotateSecret makes r.Secret the endpoint's secret; the old one is
	// still used to sign, beside the new one, for r.Overlap.
	RotateSecret(ctx context.Context, clientID, id string, r SecretRotation) (*Endpoint, error)
	// DeleteEndpoint deletes an endpoint for good: nothing more is queued
	// for it or sent to it, its pending deliveries are cancelled, and it
	// and its deliveries stay readable. Deleting it again changes nothing.
	// m, when not nil, is the condition on the endpoint's version that the
	// deletion is made on (EPRECONDITION otherwise); an endpoint deleted
	// already is deleted whatever m says.
	DeleteEndpoint(ctx context.Context, clientID, id string, m *IfMatch) error
	// RecoverDeliveries makes every failed delivery of the endpoint that
	// was queued at or after since pending again, due now, with a fresh
	// retry schedule, and returns how many. ECONFLICT for a deleted
	// endpoint.
	RecoverDeliveries(ctx context.Context, clientID, endpointID string, since time.Time) (int, error)
}

// EndpointTester sends a test send's job (EndpointService.TestDelivery) at
// once, as an attempt of a delivery goes, marked as a test, and tells what
// came of it: the deliverer, whose client and address guard the real
// deliveries go through. The attempt is not recorded.
type EndpointTester interface {
	SendTest(ctx context.Context, job *DeliveryJob) *TestResult
}

// ClaimCaps is a deliverer's pacing of its claims, not a rule of
// deliveries: what a claim must do whatever the caps (each order's events
// in order to each endpoint, nothing to a disabled endpoint, nothing under
// a live lease, the oldest due first) holds with any caps, and the caps
// only bound how many deliveries a claim leaves leased per endpoint (in
// flight and claimed ahead). The worker sets them (worker.Deliverer) from
// what it has learnt of each endpoint's pace, so that an endpoint that
// answers slowly or not at all is given no more than it can take within
// the leases; the store applies them as given and keeps nothing of them.
//
// Of's cap for the endpoints it lists, Default for the others, bound those
// leased to the claiming owner (on SQLite, whose one process holds the
// file, to any owner), so that processes sharing PostgreSQL each keep their
// own pace. All, when positive, bounds those leased to every owner
// together. The claim reads Of and must not change it.
type ClaimCaps struct {
	Default int
	Of      map[string]int
	All     int
}

// EndpointCap caps every endpoint at n deliveries in flight, whoever
// leased them.
func EndpointCap(n int) ClaimCaps { return ClaimCaps{Default: n, All: n} }

// ClaimRequest is a claim of due deliveries (DeliveryQueue): up to Limit,
// leased to Owner for Lease, no endpoint given more than Caps allow.
type ClaimRequest struct {
	Owner string
	Lease time.Duration
	Limit int
	Caps  ClaimCaps
}

// Cap is the cap of endpoint id for the claiming owner.
func (c ClaimCaps) Cap(id string) int {
	if n, ok := c.Of[id]; ok {
		return n
	}
	return c.Default
}

// DeliveryQueue is the deliverers' side of deliveries: they claim due ones
// with a lease, record how their attempts went, and give back what they
// claimed and did not attempt. Every store offers all of it, so that a
// deliverer has one way of working whatever the database.
type DeliveryQueue interface {
	// ClaimDeliveries leases up to r.Limit due deliveries to r.Owner: for
	// each order and endpoint only the oldest pending one, and no more in
	// flight per endpoint than r.Caps allow, so one slow endpoint cannot
	// take every worker.
	ClaimDeliveries(ctx context.Context, r ClaimRequest) ([]DeliveryJob, error)
	// RecordAttempts records finished attempts, all in one transaction. A
	// result whose lease was lost is recorded as an attempt but changes
	// nothing else.
	RecordAttempts(ctx context.Context, results []AttemptResult) error
	// RecordAndClaim records results, as RecordAttempts, then claims as
	// ClaimDeliveries does, in one transaction: the claim sees what was recorded (the
	// next events of these orders, the places freed under the endpoints'
	// caps), and a deliverer's round costs one commit. When the claim fails
	// after the record, the record is kept and the claim's error returned,
	// with no jobs.
	RecordAndClaim(ctx context.Context, results []AttemptResult, r ClaimRequest) ([]DeliveryJob, error)
	// ReleaseClaims gives back claimed deliveries that were not attempted,
	// as a deliverer that stops does with those it claimed ahead: each is
	// claimable again at once, as it was before its claim, its attempt and
	// try not counted. A job whose lease was lost changes nothing.
	ReleaseClaims(ctx context.Context, jobs []DeliveryJob) error
}
