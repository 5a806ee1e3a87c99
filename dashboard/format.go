package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"

	"storelink"
)

// pageNames are the page templates; each is parsed with the layout.
var pageNames = []string{"login", "error", "overview", "client", "uploads", "upload", "stock", "orders", "order", "deliveries", "endpoint",
	"portal_login", "portal_home", "portal_uploads", "portal_upload", "portal_stock", "portal_orders", "portal_order",
	"portal_deliveries", "portal_endpoints", "portal_endpoint_edit", "portal_endpoint_delete", "portal_keys",
	"endpoint_edit", "store_delete", "partners"}

func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.New(name).Funcs(funcs)
		t = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

var funcs = template.FuncMap{
	"bytes":    formatBytes,
	"when":     formatTime,
	"whenms":   formatTimeMS,
	"money":    formatMoney,
	"moneyp":   formatMoneyPtr,
	"whenp":    formatTimePtr,
	"duration": formatDuration,
	"ms":       func(n int64) string { return formatDuration(time.Duration(n) * time.Millisecond) },
	"since":    func(a time.Time, b *time.Time) string { return since(a, b) },
	"safeURL":  redactURL,
	"json":     prettyJSON,
	"reason":   returnReason,
	"short":    shortID,
	"f1":       func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"query":    query,
	"add":      func(a, b int) int { return a + b },
	"track":    func() string { return gaugeTrack },
	"states":   func() []storelink.OrderState { return storelink.OrderStates },
	// endpointStates are what an endpoint's states may name, and what a
	// test send may send: the order states and the upload event.
	"endpointStates": func() []storelink.OrderState { return storelink.EndpointStates },
	// stateLabel names what an endpoint's states hold: an order state as
	// it is, the upload event so that nobody takes it for one.
	"stateLabel": stateLabel,
	// isUploadEvent tells the upload event apart from the order states.
	"isUploadEvent": func(s storelink.OrderState) bool { return s == storelink.EventUploadFinished },
	// namesOrderState tells whether an endpoint's states name an order state.
	"namesOrderState": func(list []storelink.OrderState) bool {
		return slices.ContainsFunc(list, func(s storelink.OrderState) bool { return s != storelink.EventUploadFinished })
	},
	"groupTitles": func() map[string]string {
		return map[string]string{"failed": "Failed: retry schedule spent", "pending": "Pending", "succeeded": "Succeeded",
			"cancelled": "Cancelled: endpoint deleted"}
	},
	"deref":   func(f *float64) float64 { return *f },
	"percent": func(f float64) string { return trimZero1(fmt.Sprintf("%.1f", f*100)) + "%" },
	// testState is the state a test send of the endpoint just used, for
	// its form to keep.
	"testState": func(t *portalTest, endpointID string) string {
		if t == nil || t.EndpointID != endpointID {
			return ""
		}
		return t.State
	},
	"onlyParam": func(only bool) string { return map[bool]string{true: "problems"}[only] },
	// hasState tells whether a form's ticked states hold s.
	"hasState": func(list []storelink.OrderState, s storelink.OrderState) bool { return slices.Contains(list, s) },
	// failedFor is the refused action of that kind on the endpoint, nil
	// when there was none.
	"failedFor": func(f *endpointFailure, endpointID, action string) *endpointFailure {
		if f == nil || f.EndpointID != endpointID || f.Action != action {
			return nil
		}
		return f
	},
	// seg is a path segment of a link: a store id may hold ? or #.
	"seg": url.PathEscape,
	// dict passes named values to a template: {{template "x" (dict "A" 1)}}.
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			m[k] = kv[i+1]
		}
		return m
	},
	"clientSelect": func(clients []clientOption, client string, required bool) clientSelect {
		return clientSelect{Clients: clients, Client: client, Required: required}
	},
}

// clientSelect is the client drop-down of a filter form.
type clientSelect struct {
	Clients  []clientOption
	Client   string
	Required bool
}

// formatBytes writes a size in IEC units, as the capacity flags take them.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for ; (f >= unit || f <= -unit) && i < 3; i++ {
		f /= unit
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB"}[i]
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// formatDuration is a duration as a person reads it: 850ms, 12s, 4m10s,
// 2h5m, 3d4h.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + formatDuration(-d)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d < time.Hour:
		return trimZero(fmt.Sprintf("%dm%ds", d/time.Minute, (d%time.Minute)/time.Second))
	case d < 48*time.Hour:
		return trimZero(fmt.Sprintf("%dh%dm", d/time.Hour, (d%time.Hour)/time.Minute))
	}
	return trimZero(fmt.Sprintf("%dd%dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour))
}

func trimZero(s string) string {
	for _, z := range []string{"0s", "0m", "0h"} {
		if strings.HasSuffix(s, z) && len(s) > len(z) && (s[len(s)-len(z)-1] < '0' || s[len(s)-len(z)-1] > '9') {
			return strings.TrimSuffix(s, z)
		}
	}
	return s
}

// trimZero1 drops a ".0" from a number written with one decimal.
func trimZero1(s string) string { return strings.TrimSuffix(s, ".0") }

// since is the time from a to b, or "—" while b has not happened.
func since(a time.Time, b *time.Time) string {
	if b == nil {
		return "—"
	}
	return formatDuration(b.Sub(a))
}

// redactURL hides a password in an endpoint URL before it is shown.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		return u.String()
	}
	return s
}

// prettyJSON indents an event payload for reading.
func prettyJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

func returnReason(c *storelink.ReturnReasonCode) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%d (%s)", *c, storelink.ReturnReasons[*c])
}

// shortID is the last eight characters of an id, enough to tell rows apart
// in a table; the full id is in the link and its title. (The first ones of
// a UUIDv7 are its time, the same for every row made in one moment.)
func shortID(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-8:]
	}
	return id
}

// formatMoney writes an amount with two decimals, as prices are read.
func formatMoney(m storelink.Money) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%02d", sign, int64(m/100), int64(m%100))
}

func formatMoneyPtr(m *storelink.Money) string {
	if m == nil {
		return ""
	}
	return formatMoney(*m)
}

// formatTimeMS is a time with milliseconds, for attempts that follow each
// other within a second.
func formatTimeMS(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// query builds a query string from pairs of keys and values, leaving out
// empty values: {{query "client" .Client "status" .Status}}.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// stateLabel is how the pages name an endpoint state: an order state as the
// API names it, and the upload event as what it is, with the API's name.
func stateLabel(s storelink.OrderState) string {
	if s == storelink.EventUploadFinished {
		return "Upload finished (" + string(s) + ")"
	}
	return string(s)
}
