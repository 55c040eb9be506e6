package app

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// humanPrinter prints the timeline as `kubectl events` prints Events
// (k8s.io/kubectl/pkg/cmd/events EventPrinter): headers once, ages rather
// than times, terminal escapes removed. Its columns are the timeline's:
// when the Event began and last happened, what, how often, who reported
// it, and which incarnation (the uid of the object it regards). Wide adds
// the record's name (<event name>.<resourceVersion>, which `kubectl get
// eventrecords` finds) and whether the Event is still live; -w following
// history adds that state alone, since the feed prints an Event's end as
// another row of it.
type humanPrinter struct {
	wide          bool
	state         bool
	noHeaders     bool
	allNamespaces bool
	now           func() time.Time

	headersPrinted bool
}

func (p *humanPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	if !p.noHeaders && !p.headersPrinted {
		p.printHeaders(w)
		p.headersPrinted = true
	}
	switch t := obj.(type) {
	case *historyv1alpha1.EventRecordList:
		for i := range t.Items {
			p.printRecord(w, &t.Items[i])
		}
	case *historyv1alpha1.EventRecord:
		p.printRecord(w, t)
	default:
		return fmt.Errorf("cannot print %T on a timeline", obj)
	}
	return nil
}

func (p *humanPrinter) printHeaders(w io.Writer) {
	columns := []string{"FIRST SEEN", "LAST SEEN", "TYPE", "REASON", "COUNT", "REPORTER", "UID"}
	if p.allNamespaces {
		columns = append([]string{"NAMESPACE"}, columns...)
	}
	switch {
	case p.wide:
		columns = append(columns, "EVENT", "STATE")
	case p.state:
		columns = append(columns, "STATE")
	}
	fmt.Fprintln(w, strings.Join(append(columns, "MESSAGE"), "\t"))
}

func (p *humanPrinter) printRecord(w io.Writer, r *historyv1alpha1.EventRecord) {
	e := &r.Event
	now := p.now()
	cells := []string{
		age(now, timeline.FirstSeen(e)),
		age(now, r.LastSeen.Time),
		printers.EscapeTerminal(e.Type),
		printers.EscapeTerminal(e.Reason),
		fmt.Sprint(timeline.Count(e)),
		printers.EscapeTerminal(orNone(timeline.Reporter(e))),
		printers.EscapeTerminal(orNone(string(e.Regarding.UID))),
	}
	if p.allNamespaces {
		cells = append([]string{printers.EscapeTerminal(r.Namespace)}, cells...)
	}
	switch {
	case p.wide:
		cells = append(cells, printers.EscapeTerminal(e.Name), state(now, r))
	case p.state:
		cells = append(cells, state(now, r))
	}
	cells = append(cells, printers.EscapeTerminal(strings.TrimSpace(e.Note)))
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// state says whether the Event is still served by the Events API, or since
// when history alone holds it.
func state(now time.Time, r *historyv1alpha1.EventRecord) string {
	switch {
	case r.Live:
		return "live"
	case r.DeletedAt != nil:
		return "deleted " + age(now, r.DeletedAt.Time) + " ago"
	default:
		return "deleted"
	}
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
