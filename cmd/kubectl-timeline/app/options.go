package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/search"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

var recordTypeMeta = metav1.TypeMeta{APIVersion: historyv1alpha1.SchemeGroupVersion.String(), Kind: "EventRecord"}

// Options is what Run needs, resolved from Flags.
type Options struct {
	Namespace     string
	AllNamespaces bool
	Watch         bool
	Object        Object
	Filter        timeline.Filter

	sources *sources
	// live follows the Events API; history, history's feed, where it is
	// installed.
	live, history follower

	// human is set for the table forms (default and wide); printer for the
	// others (json, yaml, ...), which print EventRecords.
	human   *humanPrinter
	printer printers.ResourcePrinter
	// showManagedFields keeps the Events' managedFields in json and yaml,
	// which kubectl's printers drop from top-level objects only.
	showManagedFields bool
	// web is set with --web: the story is served as a page instead.
	web *webOptions

	genericiooptions.IOStreams
}

// ToOptions resolves the object, the clients and the printer.
func (f *Flags) ToOptions(args []string) (*Options, error) {
	o := &Options{
		AllNamespaces: f.AllNamespaces,
		Watch:         f.Watch,
		IOStreams:     f.IOStreams,
	}
	var err error
	if o.Namespace, _, err = f.ConfigFlags.ToRawKubeConfigLoader().Namespace(); err != nil {
		return nil, err
	}
	mapper, mapperErr := f.ConfigFlags.ToRESTMapper()
	if mapperErr != nil {
		mapper = nil
	}
	// --web alone opens the namespace's (or with -A the cluster's) Events
	// over time, from which the page reaches each object's story.
	if len(args) == 0 && !f.Web {
		return nil, fmt.Errorf("want one object as TYPE/NAME (e.g. pod/web-0), or --web for the namespace's Events over time")
	}
	if len(args) > 0 {
		if o.Object, err = ResolveObject(mapper, args); err != nil {
			return nil, err
		}
	}
	for _, t := range f.Types {
		o.Filter.Types = append(o.Filter.Types, canonicalType(t))
	}
	if f.Since < 0 {
		return nil, fmt.Errorf("--since must not be negative: %s", f.Since)
	}
	o.Filter.Search = f.Search
	if f.Cluster != "" {
		if err := validCluster(f.Cluster); err != nil {
			return nil, err
		}
	}
	if f.Since > 0 {
		// One instant for both sources: the server cuts history there, and
		// the live Events are cut here at the same instant.
		o.Filter.Since = time.Now().Add(-f.Since)
	}

	config, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	history, err := historyclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	namespace := o.Namespace
	if o.AllNamespaces {
		namespace = ""
	}
	o.sources = &sources{
		events:    client.CoreV1().Events(namespace),
		history:   history.EventRecords(namespace),
		namespace: namespace,
		object:    o.Object,
		filter:    o.Filter,
		cluster:   f.Cluster,
		chunkSize: f.ChunkSize,
	}
	o.live = &liveFollower{events: o.sources.events, selector: o.sources.liveSelector()}
	o.history = &historyFollower{history: o.sources.history, selector: o.sources.historySelector()}

	if f.Web {
		if *f.PrintFlags.OutputFormat != "" {
			return nil, fmt.Errorf("--web draws the timeline in the browser; it takes no -o")
		}
		if o.web, err = f.webOptions(config, mapper, client.CoreV1(), history); err != nil {
			return nil, err
		}
		return o, nil
	}

	switch format := *f.PrintFlags.OutputFormat; format {
	case "", "wide":
		o.human = &humanPrinter{wide: format == "wide", noHeaders: f.NoHeaders, allNamespaces: f.AllNamespaces, now: time.Now}
	default:
		if o.printer, err = f.PrintFlags.ToPrinter(); err != nil {
			return nil, err
		}
		o.showManagedFields = f.PrintFlags.JSONYamlPrintFlags.ShowManagedFields
	}
	return o, nil
}

// canonicalType spells a type as Events do, so that the server-side
// selector matches what `kubectl events --types` matches ignoring case.
func canonicalType(t string) string {
	switch {
	case strings.EqualFold(t, "Normal"):
		return "Normal"
	case strings.EqualFold(t, "Warning"):
		return "Warning"
	}
	return t
}

// Validate refuses what `kubectl events` refuses.
func (o *Options) Validate() error {
	for _, t := range o.Filter.Types {
		if t != "Normal" && t != "Warning" {
			return fmt.Errorf("valid --types are Normal or Warning")
		}
	}
	if o.Filter.Search != "" {
		// The server's own checks, here before anything is listed.
		if o.Filter.Since.IsZero() {
			return fmt.Errorf("--search needs --since: history bounds a text search's window (the server's --history-max-query-window)")
		}
		if err := search.Check(o.Filter.Search); err != nil {
			return fmt.Errorf("--search: %v", err)
		}
	}
	return nil
}

// Run prints the timeline, then follows it with -w; with --web it serves
// the page instead.
func (o *Options) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.web != nil {
		return o.serveWeb(ctx)
	}
	tl := timeline.New()
	var resourceVersion string
	if o.sources.cluster == "" {
		var err error
		if resourceVersion, err = o.sources.listLive(ctx, func(r historyv1alpha1.EventRecord) { tl.Add(r) }); err != nil {
			return err
		}
	}
	follower := o.history
	historyVersion, err := o.sources.listHistory(ctx, func(r historyv1alpha1.EventRecord) { tl.Add(r) })
	if reason, ok := historyUnavailable(err, o.sources.namespace); ok && o.sources.cluster != "" {
		// The live Events are of the server's cluster, whichever it is:
		// they cannot stand in for one cluster's history.
		return fmt.Errorf("--cluster reads history: %s", reason)
	} else if ok {
		fmt.Fprintf(o.ErrOut, "%s: showing live Events only, without those of deleted objects or past the Events' TTL.\n", reason)
		follower = o.live
	} else if err != nil {
		return err
	} else {
		resourceVersion = historyVersion
		if o.human != nil && o.Watch {
			// The feed shows Events end: the table says which.
			o.human.state = true
		}
	}

	records := tl.Records(o.Filter)
	if len(records) == 0 && !o.Watch {
		where := "in " + o.Namespace + " namespace"
		if o.AllNamespaces {
			where = "in any namespace"
		}
		if o.sources.cluster != "" {
			where += " of cluster " + o.sources.cluster
		}
		fmt.Fprintf(o.ErrOut, "No events found for %s %s.\n", o.Object, where)
		return nil
	}
	if !o.Watch {
		return o.print(&historyv1alpha1.EventRecordList{Items: records})
	}
	// Under -w, json and yaml print one object at a time, as `kubectl get
	// -w -o json` does, so that a consumer reads the same shape before
	// and after the list; the table prints the list aligned, then a row
	// per new Event.
	if o.human != nil && len(records) > 0 {
		if err := o.print(&historyv1alpha1.EventRecordList{Items: records}); err != nil {
			return err
		}
	} else {
		for i := range records {
			if err := o.print(&records[i]); err != nil {
				return err
			}
		}
	}
	return o.follow(ctx, follower, tl, resourceVersion)
}

// follow prints each new version of the object's Events, and with history
// each Event's end, until ctx ends.
func (o *Options) follow(ctx context.Context, f follower, tl *timeline.Timeline, resourceVersion string) error {
	return f.follow(ctx, resourceVersion, func(r historyv1alpha1.EventRecord) error {
		if !tl.Add(r) || !o.Filter.Match(&r) {
			return nil
		}
		return o.print(&r)
	})
}

// prepare readies a record for json or yaml: typed, and without the
// Event's managedFields unless asked, as `kubectl get -o yaml` shows objects.
func (o *Options) prepare(r *historyv1alpha1.EventRecord) {
	r.TypeMeta = recordTypeMeta
	if !o.showManagedFields {
		r.Event.ManagedFields = nil
	}
}

// print writes one record or a list, flushed at once: under -w a new Event
// must show as soon as it arrives.
func (o *Options) print(obj runtime.Object) error {
	if o.human == nil {
		// Items carry their kind, as in `kubectl get -o json`, so each
		// can be read on its own (jq '.items[]').
		switch t := obj.(type) {
		case *historyv1alpha1.EventRecordList:
			for i := range t.Items {
				o.prepare(&t.Items[i])
			}
		case *historyv1alpha1.EventRecord:
			o.prepare(t)
		}
		return o.printer.PrintObj(obj, o.Out)
	}
	w := printers.GetNewTabWriter(o.Out)
	if err := o.human.PrintObj(obj, w); err != nil {
		return err
	}
	return w.Flush()
}
