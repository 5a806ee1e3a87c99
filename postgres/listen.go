package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Listen holds one connection of its own LISTENing on ChannelUploads and
// ChannelDeliveries and calls wake with the channel of every notification
// sent by this installation (its schema), so that work accepted by one
// process is picked up at once by whichever process is free. Right after
// it starts listening it calls wake once for each channel: what was
// notified before then was missed. It returns nil when ctx ends, and the
// error when the connection fails; the caller starts it again (the workers'
// polling covers the gap).
func (db *DB) Listen(ctx context.Context, wake func(channel string)) error {
	// A connection outside the pool: LISTEN belongs to a session, and a
	// pooled connection would carry it to whoever takes it next.
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range []string{ChannelUploads, ChannelDeliveries} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen on %s: %w", ch, err)
		}
	}
	wake(ChannelUploads)
	wake(ChannelDeliveries)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen: %w", err)
		}
		if n.Payload == db.schema {
			wake(n.Channel)
		}
	}
}
