// Package search is the text search of Event notes that history answers
// (eventrecords' note.contains=) and that clients match the same way: what
// a term must be, and what "holds the term" means. It depends on nothing but
// the standard library, so that kubectl-timeline uses it without the
// store's dependencies.
package search

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A text search is a case-insensitive substring of a Searchable history
// column (the note), answered by the stores from a trigram index (SQLite's FTS5 trigram
// tokenizer, PostgreSQL's pg_trgm), never by reading the window's rows.
// A trigram index finds a term through its runs of three characters, so a
// term must hold one that both indexes look up: pg_trgm takes trigrams of
// words (runs of letters and digits) only, and a pattern with none would
// be a read of the whole index there.
const (
	// MinRun is the shortest run of letters or digits a search term
	// must hold.
	MinRun = 3
	// MaxBytes bounds a term: a note is at most 1 KiB (kube-apiserver
	// truncates Event messages there), so no longer term matches anything.
	MaxBytes = 1024
)

// Check says what is wrong with a search term, or nil.
func Check(term string) error {
	switch {
	case !utf8.ValidString(term):
		return fmt.Errorf("the search term is not valid UTF-8")
	case strings.ContainsRune(term, 0):
		return fmt.Errorf("the search term holds a NUL character")
	case len(term) > MaxBytes:
		return fmt.Errorf("the search term is %d bytes long, longer than a note can be (%d)", len(term), MaxBytes)
	}
	run, longest := 0, 0
	for _, r := range term {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if longest < MinRun {
		return fmt.Errorf("the search term %q needs at least %d letters or digits in a row: the trigram index finds nothing shorter", term, MinRun)
	}
	return nil
}

// ContainsFold reports whether s holds term, ignoring case as the stores'
// indexes do (lower case, rune by rune).
func ContainsFold(s, term string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(term))
}

// EscapeLike escapes LIKE's wildcards (% and _) and its escape character
// (\) in a term, for a LIKE or ILIKE with ESCAPE '\'.
func EscapeLike(term string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(term)
}
