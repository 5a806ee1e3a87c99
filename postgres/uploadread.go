package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"storelink"
)

const uploadColumns = `id, client_id, file_name, size_bytes, sha256, status, received_at, started_at, finished_at,
	rows_total, rows_applied, rows_rejected, errors, warnings`

func scanUpload(row interface{ Scan(...any) error }) (*storelink.Upload, error) {
	u := &storelink.Upload{}
	var errs, warns []byte
	if err := row.Scan(&u.ID, &u.ClientID, &u.FileName, &u.SizeBytes, &u.SHA256, &u.Status, &u.ReceivedAt, &u.StartedAt, &u.FinishedAt,
		&u.RowsTotal, &u.RowsApplied, &u.RowsRejected, &errs, &warns); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(errs, &u.Errors); err != nil {
		return nil, fmt.Errorf("decode errors of upload %s: %w", u.ID, err)
	}
	if err := json.Unmarshal(warns, &u.Warnings); err != nil {
		return nil, fmt.Errorf("decode warnings of upload %s: %w", u.ID, err)
	}
	return u, nil
}

// Upload returns one upload of a client.
func (db *DB) Upload(ctx context.Context, clientID, uploadID string) (*storelink.Upload, error) {
	u, err := scanUpload(db.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = $1 AND id = $2`, clientID, uploadID))
	if err != nil {
		return nil, notFound(err, "upload %q", uploadID)
	}
	return u, nil
}

// Uploads lists a client's uploads, newest first.
func (db *DB) Uploads(ctx context.Context, clientID string, f storelink.UploadFilter) ([]storelink.Upload, error) {
	// An unknown cursor would find no seq and so an empty page, which
	// reads as the end of the list: refuse it instead.
	if f.Before != "" {
		if err := exists(ctx, db.pool, `SELECT 1 FROM uploads WHERE client_id = $1 AND id = $2`, clientID, f.Before); noRows(err) {
			return nil, storelink.CursorError("before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	var a args
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE client_id = ` + a.add(clientID)
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE client_id = $1 AND id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(f.Limit)
	rows, err := db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Upload{}
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}

// QueueDepth counts uploads not yet finished.
func (db *DB) QueueDepth(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM uploads WHERE status IN ('accepted', 'processing')`).Scan(&n)
	return n, err
}

// Backlog tells how uploads wait, of one client or (clientID "") of all.
func (db *DB) Backlog(ctx context.Context, clientID string) (storelink.Backlog, error) {
	var b storelink.Backlog
	var seq *int64
	var oldest *time.Time
	err := db.pool.QueryRow(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads
		WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND ($1 = '' OR client_id = $1)`, clientID).
		Scan(&b.Waiting, &seq, &oldest)
	if err != nil {
		return b, fmt.Errorf("count waiting uploads: %w", err)
	}
	if oldest != nil {
		b.Oldest = oldest.UTC()
	}
	if clientID != "" && seq == nil {
		return b, nil // nothing of the client waits, so nothing is ahead of it
	}
	bound := int64(math.MaxInt64)
	if clientID != "" {
		bound = *seq
	}
	err = db.pool.QueryRow(ctx, `SELECT count(*) FROM uploads
		WHERE status IN ('accepted', 'processing') AND seq <= $1`, bound).Scan(&b.Ahead)
	if err != nil {
		return b, fmt.Errorf("count uploads ahead: %w", err)
	}
	return b, nil
}
