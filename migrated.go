package storelink

import (
	"fmt"
	"strconv"
	"strings"
)

// Migrated is what opening a database did to its schema: the versions of
// the migrations it applied, in order, and the schema's version after.
type Migrated struct {
	Applied []int64
	Version int64
}

// String says it in a line, as `storelink migrate` prints it after the
// database's name: "applied 3 migrations (20–22); the schema is at
// version 22", or "up to date (schema version 22)".
func (m Migrated) String() string {
	switch len(m.Applied) {
	case 0:
		return fmt.Sprintf("up to date (schema version %d)", m.Version)
	case 1:
		return fmt.Sprintf("applied 1 migration (%d); the schema is at version %d", m.Applied[0], m.Version)
	}
	versions := make([]string, len(m.Applied))
	for i, v := range m.Applied {
		versions[i] = strconv.FormatInt(v, 10)
	}
	list := strings.Join(versions, ", ")
	if first, last := m.Applied[0], m.Applied[len(m.Applied)-1]; last-first == int64(len(m.Applied)-1) {
		list = fmt.Sprintf("%d–%d", first, last)
	}
	return fmt.Sprintf("applied %d migrations (%s); the schema is at version %d", len(m.Applied), list, m.Version)
}
