package service

import (
	"context"
	"strconv"

	"storelink"
)

// Order returns one order with its items.
func (s *Service) Order(ctx context.Context, id string) (*storelink.Order, error) {
	o, err := s.d.GetOrder(ctx, id)
	if err != nil {
		return nil, orderNotFound(err, id)
	}
	return o, nil
}

// Orders lists orders, newest first.
func (s *Service) Orders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
	return s.d.ListOrders(ctx, f)
}

// OrderEvents lists an order's events, oldest first.
func (s *Service) OrderEvents(ctx context.Context, id string) ([]storelink.EventRecord, error) {
	ok, err := s.d.OrderExists(ctx, id)
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, orderNotFound(ErrNotFound, id)
	}
	return s.d.ListOrderEvents(ctx, id)
}

// Events lists a client's events after a cursor, in the order they were
// committed. The cursor is the event's number among its client's events.
func (s *Service) Events(ctx context.Context, clientID, after string, limit int) ([]storelink.EventRecord, string, error) {
	var from int64
	if after != "" {
		var err error
		if from, err = strconv.ParseInt(after, 10, 64); err != nil || from < 0 {
			return nil, "", storelink.Errorf(storelink.EINVALID, "after %q is not a cursor returned by this call.", after)
		}
	}
	list, err := s.d.ListEvents(ctx, clientID, from, limit)
	if err != nil {
		return nil, "", err
	}
	next := after
	if len(list) > 0 {
		next = list[len(list)-1].Cursor
	}
	return list, next, nil
}
