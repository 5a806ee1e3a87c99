package storelink

import (
	"strconv"
	"strings"
)

// An event feed's cursor names an event: its number among the feed's
// events and a tag of its id, "1234.9f86d081". The number says where the
// feed goes on; the tag lets the feed tell that the event at that number
// is the one the cursor was given for. After a restore from an older
// backup the numbers after the backup are given again to other events,
// and another database has its own: a cursor whose tag is not that of the
// event at its number was not given out by this feed, and reading on from
// it would skip or repeat events silently. A bare number, as cursors were
// before they had a tag, is still taken, unchecked.

// eventTagLen is the length of a cursor's tag: the last hex digits of the
// event's id, which are random (NewID), so that two events at one number
// share a tag once in four billion.
const eventTagLen = 8

// EventCursor is the cursor of the event of number n and id id.
func EventCursor(n int64, id string) string {
	return strconv.FormatInt(n, 10) + "." + eventTag(id)
}

func eventTag(id string) string {
	if len(id) < eventTagLen {
		return id
	}
	return id[len(id)-eventTagLen:]
}

// ParseEventCursor reads a cursor: its number, and its tag ("" for a bare
// number). ok is false for anything else.
func ParseEventCursor(c string) (n int64, tag string, ok bool) {
	num, tag, tagged := strings.Cut(c, ".")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || num != strconv.FormatInt(n, 10) {
		return 0, "", false
	}
	if tagged && (len(tag) != eventTagLen || strings.Trim(tag, "0123456789abcdef") != "") {
		return 0, "", false
	}
	return n, tag, true
}

// TagOf tells whether tag is the tag of the event of id id.
func TagOf(tag, id string) bool { return tag == eventTag(id) }
