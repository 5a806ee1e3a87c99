package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"storelink"
)

const uploadColumns = `id, client_id, file_name, size_bytes, sha256, status, received_at, started_at, finished_at,
	rows_total, rows_applied, rows_rejected, errors, warnings`

func scanUpload(row interface{ Scan(...any) error }) (*storelink.Upload, error) {
	u := &storelink.Upload{}
	var received int64
	var started, finished sql.NullInt64
	var errs, warns string
	if err := row.Scan(&u.ID, &u.ClientID, &u.FileName, &u.SizeBytes, &u.SHA256, &u.Status, &received, &started, &finished,
		&u.RowsTotal, &u.RowsApplied, &u.RowsRejected, &errs, &warns); err != nil {
		return nil, err
	}
	u.ReceivedAt, u.StartedAt, u.FinishedAt = fromMS(received), fromNullMS(started), fromNullMS(finished)
	if err := json.Unmarshal([]byte(errs), &u.Errors); err != nil {
		return nil, fmt.Errorf("decode errors of upload %s: %w", u.ID, err)
	}
	if err := json.Unmarshal([]byte(warns), &u.Warnings); err != nil {
		return nil, fmt.Errorf("decode warnings of upload %s: %w", u.ID, err)
	}
	return u, nil
}

// Upload returns one upload of a client.
func (db *DB) Upload(ctx context.Context, clientID, uploadID string) (*storelink.Upload, error) {
	u, err := scanUpload(db.read.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = ? AND id = ?`, clientID, uploadID))
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
		if err := exists(ctx, db.read, `SELECT 1 FROM uploads WHERE client_id = ? AND id = ?`, clientID, f.Before); errors.Is(err, sql.ErrNoRows) {
			return nil, storelink.CursorError("before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE client_id = ?`
	args := []any{clientID}
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE client_id = ? AND id = ?)`
		args = append(args, clientID, f.Before)
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, f.Limit)
	rows, err := db.read.QueryContext(ctx, q, args...)
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
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM uploads WHERE status IN ('accepted', 'processing')`).Scan(&n)
	return n, err
}

// Backlog tells how uploads wait, of one client or (clientID "") of all.
func (db *DB) Backlog(ctx context.Context, clientID string) (storelink.Backlog, error) {
	var b storelink.Backlog
	var seq, oldest sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads INDEXED BY uploads_unfinished
		WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND (? = '' OR client_id = ?)`, clientID, clientID).
		Scan(&b.Waiting, &seq, &oldest)
	if err != nil {
		return b, fmt.Errorf("count waiting uploads: %w", err)
	}
	if oldest.Valid {
		b.Oldest = fromMS(oldest.Int64)
	}
	if clientID != "" && !seq.Valid {
		return b, nil // nothing of the client waits, so nothing is ahead of it
	}
	if clientID == "" {
		seq.Int64 = math.MaxInt64
	}
	err = db.read.QueryRowContext(ctx, `SELECT count(*) FROM uploads INDEXED BY uploads_unfinished
		WHERE status IN ('accepted', 'processing') AND seq <= ?`, seq.Int64).Scan(&b.Ahead)
	if err != nil {
		return b, fmt.Errorf("count uploads ahead: %w", err)
	}
	return b, nil
}
