package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"storelink"
)

// Claim leases the next upload to process: a batch of one.
func (s *Uploads) Claim(ctx context.Context, owner string, lease time.Duration) (*storelink.Claim, error) {
	claims, err := s.ClaimBatch(ctx, owner, lease, storelink.BatchLimit{Uploads: 1})
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	return claims[0], nil
}

// ClaimBatch leases the next uploads to process, in one transaction: the
// driver reads the uploads that can be claimed, client by client, and
// locks them, so that two processes never claim the same, nor two uploads
// of one client between them; which of them go together is decided here
// (pick), and the driver leases those.
func (s *Uploads) ClaimBatch(ctx context.Context, owner string, lease time.Duration, limit storelink.BatchLimit) ([]*storelink.Claim, error) {
	limit.Uploads = max(limit.Uploads, 1)
	var claims []*storelink.Claim
	err := s.inUploadTx(ctx, func(tx UploadTx) error {
		claims = nil   // inUploadTx may run this again
		now := s.now() // once the transaction began: the database may have been waited for
		p := ClaimParams{Owner: owner, Now: now, Until: now.Add(lease), Limit: limit.Uploads,
			Backoff: storelink.InterruptedBackoff, Accepted: storelink.UploadAccepted, Processing: storelink.UploadProcessing}
		claimable, err := tx.ClaimableUploads(ctx, p)
		if err != nil {
			return fmt.Errorf("read claimable uploads: %w", err)
		}
		seqs := pick(claimable, limit)
		if len(seqs) == 0 {
			return nil
		}
		if claims, err = tx.LeaseUploads(ctx, p, seqs); err != nil {
			return fmt.Errorf("lease uploads: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim uploads: %w", err)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	ids := make([]string, len(claims))
	for i, c := range claims {
		c.Owner, c.Status = owner, storelink.UploadProcessing
		ids[i] = c.ID
	}
	// The files are read once the claim committed: they are the claim's
	// now, and no other call changes them until it ends.
	bodies, err := s.d.UploadBodies(ctx, ids)
	if err != nil {
		// Given back uncounted, to be claimed again at once: the files
		// were not even read.
		for _, c := range claims {
			_ = s.Release(context.WithoutCancel(ctx), c, 0)
		}
		return nil, fmt.Errorf("read the files of the uploads claimed: %w", err)
	}
	for _, c := range claims {
		c.Body = bodies[c.ID]
	}
	return claims, nil
}

// pick chooses, of the claimable uploads, those a claim takes together.
// Taken client by client (the clients in the order of their oldest upload
// that can be claimed, each client's uploads in acceptance order), it takes
// the first, and after it the next ones while they number at most
// limit.Uploads, their files hold at most limit.Bytes together (the
// first's included) and none was claimed before (the first included). An
// upload claimed before is thus claimed alone, so that a file that kills
// its processor never takes others' attempts with it; and a claim holds
// few clients when their backlogs are deep, leaving the others to the
// other processes on the database. It returns their queue positions.
func pick(claimable []Claimable, limit storelink.BatchLimit) []int64 {
	head := make(map[string]int64, len(claimable)) // client → its oldest
	for _, c := range claimable {
		if h, ok := head[c.ClientID]; !ok || c.Seq < h {
			head[c.ClientID] = c.Seq
		}
	}
	order := slices.Clone(claimable)
	slices.SortFunc(order, func(a, b Claimable) int {
		return cmp.Or(cmp.Compare(head[a.ClientID], head[b.ClientID]), cmp.Compare(a.Seq, b.Seq))
	})
	var seqs []int64
	var bytes int64
	tried := false
	for i, c := range order {
		bytes += c.SizeBytes
		tried = tried || c.Attempts > 0
		if i > 0 && (i >= limit.Uploads || bytes > limit.Bytes || tried) {
			break
		}
		seqs = append(seqs, c.Seq)
	}
	return seqs
}
