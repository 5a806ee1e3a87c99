package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"storelink"
)

// writeReport prints the processing report of a finished upload: the
// outcome, the row counts, then the errors and warnings grouped by type,
// each message with its lines collapsed into ranges.
func writeReport(w io.Writer, up *storelink.Upload) {
	outcome := string(up.Status)
	switch {
	case up.Status == storelink.UploadRejected:
		outcome = "rejected, nothing applied"
	case up.Status == storelink.UploadCancelled:
		outcome = "cancelled, nothing applied"
	case len(up.Errors) > 0:
		outcome = "applied with row errors"
	case len(up.Warnings) > 0:
		outcome = "applied with warnings"
	}
	fmt.Fprintf(w, "%s: %s\n", up.FileName, outcome)
	fmt.Fprintf(w, "  upload  %s (%s, sha256 %s)\n", up.ID, formatBytes(up.SizeBytes), up.SHA256)
	unchanged := ""
	if up.RowsUnchanged > 0 {
		unchanged = fmt.Sprintf(" (%d unchanged)", up.RowsUnchanged)
	}
	fmt.Fprintf(w, "  rows    %d total, %d applied%s, %d rejected\n", up.RowsTotal, up.RowsApplied, unchanged, up.RowsRejected)
	writeProblems(w, "errors", up.Errors)
	writeProblems(w, "warnings", up.Warnings)
}

func writeProblems(w io.Writer, heading string, problems []storelink.Problem) {
	if len(problems) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", heading)
	var types []string
	byType := map[string][]storelink.Problem{}
	for _, p := range problems {
		if _, ok := byType[p.Type]; !ok {
			types = append(types, p.Type)
		}
		byType[p.Type] = append(byType[p.Type], p)
	}
	for _, t := range types {
		n := 0
		for _, p := range byType[t] {
			n += problemCount(p)
		}
		fmt.Fprintf(w, "  %s (%s)\n", t, plural(n, "line"))
		for _, p := range byType[t] {
			fmt.Fprintf(w, "    %s\n", p.Message)
			if len(p.LineNumbers) > 0 || p.Count > 0 {
				fmt.Fprintf(w, "      %s%s\n", formatLines(p.LineNumbers, p.Count), problemValues(p))
			}
			if p.Details != "" {
				fmt.Fprintf(w, "      %s\n", p.Details)
			}
		}
	}
}

func problemCount(p storelink.Problem) int { return max(p.Count, len(p.LineNumbers)) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// problemValues names the values behind a problem where they help the
// partner fix it: the unknown stores, the duplicated store and EAN pairs.
func problemValues(p storelink.Problem) string {
	var label string
	var key func(storelink.LineRef) string
	switch p.Type {
	case storelink.ProblemUnknownStore:
		label, key = "stores", func(r storelink.LineRef) string { return r.StoreID }
	case storelink.ProblemDuplicated:
		label, key = "store/ean", func(r storelink.LineRef) string { return r.StoreID + "/" + r.EAN }
	default:
		return ""
	}
	var vals []string
	for _, r := range p.LineNumbers {
		if v := key(r); v != "" && v != "/" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return ""
	}
	const show = 5
	more := ""
	if len(vals) > show {
		vals, more = vals[:show], fmt.Sprintf(" … and %d more", len(vals)-show)
	}
	return " (" + label + " " + strings.Join(vals, ", ") + more + ")"
}

// maxRanges is how many ranges of line numbers a report shows per message.
const maxRanges = 20

// formatLines collapses line numbers into ranges: "lines 4-9, 12, 15".
// count is the number of lines with the problem, which exceeds the
// references when the service cut the list; past maxRanges ranges, or past
// the references, the rest is counted: "… and 37 more".
func formatLines(refs []storelink.LineRef, count int) string {
	lines := make([]int, 0, len(refs))
	for _, r := range refs {
		lines = append(lines, r.LineNumber)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	count = max(count, len(lines))

	var parts []string
	shown := 0
	for i := 0; i < len(lines) && len(parts) < maxRanges; {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		} else {
			parts = append(parts, strconv.Itoa(lines[i]))
		}
		shown += j - i + 1
		i = j + 1
	}
	word := "lines "
	if count == 1 && shown == 1 {
		word = "line "
	}
	s := word + strings.Join(parts, ", ")
	if more := count - shown; more > 0 {
		if shown == 0 {
			return plural(more, "line")
		}
		s += fmt.Sprintf(" … and %d more", more)
	}
	return s
}
