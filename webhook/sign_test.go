package webhook

import (
	"encoding/base64"
	"strings"
	"time"
)

// sign is the plain v1 signature of one message, made anew each time: the
// reference the client's signers are held to, itself checked against the
// specification's vectors and the official library.
func sign(key []byte, msgID string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, ts.Unix(), body))
}

// signatureHeader is the webhook-signature value of a message signed with
// every key, space-separated, made with sign.
func signatureHeader(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = sign(k, msgID, ts, body)
	}
	return strings.Join(sigs, " ")
}
