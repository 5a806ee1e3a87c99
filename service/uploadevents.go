package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"storelink"
)

// AnnounceUploads writes the events of up to limit uploads that ended and
// whose event is due, with their deliveries, and returns how many it took.
//
// An upload's end (its apply, rejection or cancel) marks its event due in
// the transaction that ends it, when an endpoint of its client asks for
// it (FinishParams.Announce); the event itself is written here, after that
// commit, from the upload as it was committed, so that the transaction of
// an apply, which a driver may send in a few round trips for many uploads
// at once, reads nothing more for it. A process that stops between the two
// leaves the mark, and the next AnnounceUploads, of any process, writes the
// event: none is lost, and none is written twice (TakeUploadEvent).
//
// The endpoints that receive it are read when it is written, as an order
// event's are: an endpoint that asked for it in between, and is still
// there, receives it.
func (s *Orders) AnnounceUploads(ctx context.Context, limit int) (int, error) {
	due, err := s.d.DueUploadEvents(ctx, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	err = s.announceIn(ctx, due)
	if err == nil || ctx.Err() != nil {
		return len(due), err
	}
	// One upload whose event cannot be written would hold back every later
	// one: each is tried alone, and the others go.
	var errs []error
	for i := range due {
		if err := s.announceIn(ctx, due[i:i+1]); err != nil {
			errs = append(errs, err)
		}
	}
	return len(due) - len(errs), errors.Join(errs...)
}

// announceIn writes the events of uploads in one transaction.
func (s *Orders) announceIn(ctx context.Context, uploads []storelink.Upload) error {
	return inTx(ctx, s.d, func(tx OrderTx) error {
		now := s.now()
		for i := range uploads {
			if err := announce(ctx, tx, &uploads[i], s.statusURL, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// announce writes the event of upload u, unless another transaction took
// it, and queues it for the endpoints that ask for it.
func announce(ctx context.Context, tx OrderTx, u *storelink.Upload, statusURL func(string, string) string, now time.Time) error {
	taken, err := tx.TakeUploadEvent(ctx, u.ID)
	if err != nil {
		return fmt.Errorf("take the event of upload %s: %w", u.ID, err)
	}
	if !taken {
		return nil
	}
	ev := storelink.NewUploadEvent(u, storelink.NewID(now), statusURL(u.ClientID, u.ID))
	kind := storelink.EventUploadFinished
	endpoints, err := tx.WriteEvent(ctx, WriteEventParams{ClientID: u.ClientID, EventID: ev.EventID, UploadID: u.ID, State: kind,
		Payload: ev.Marshal(), At: now})
	if err != nil {
		return fmt.Errorf("write the event of upload %s: %w", u.ID, err)
	}
	var ds []NewDelivery
	for _, e := range endpoints {
		if e.Wants(kind) {
			ds = append(ds, NewDelivery{ID: storelink.NewID(now), EndpointID: e.ID})
		}
	}
	if len(ds) == 0 {
		return nil
	}
	err = tx.InsertDeliveries(ctx, InsertDeliveriesParams{ClientID: u.ClientID, At: now, State: storelink.DeliveryPending, Deliveries: ds,
		Event: QueuedEvent{ID: ev.EventID, Chain: u.ID, State: kind}})
	if err != nil {
		return fmt.Errorf("queue deliveries of event %s: %w", ev.EventID, err)
	}
	return nil
}
