package app

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/cmd/kubectl-timeline/web"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// maxPageRecords bounds the Events one story sends the page: past it the
// oldest are left out and the page says how many. The page is measured at
// 10,000 (docs/benchmarks.md).
const maxPageRecords = 20000

// webOptions is what --web needs beyond the terminal's Options.
type webOptions struct {
	port    int
	browser bool
	backend *webBackend
}

// webBackend answers the page (web.Backend) with the kubeconfig's identity,
// through the same sources and followers as the terminal's timeline.
type webBackend struct {
	// events is the one typed client the page needs: holding the whole
	// clientset as an interface would link every group's client into
	// the binary (9 MB).
	events    corev1client.EventsGetter
	history   historyclient.HistoryV1alpha1Interface
	metadata  metadata.Interface
	dynamic   dynamic.Interface
	mapper    meta.RESTMapper
	chunkSize int64
}

// sources lists one query's Events: the object's by kind and name, or with
// uids the objects' of those uids.
func (b *webBackend) sources(q web.Query, uids []string) *sources {
	namespace := q.Namespace
	if q.All {
		namespace = ""
	}
	return &sources{
		events:    b.events.Events(namespace),
		history:   b.history.EventRecords(namespace),
		namespace: namespace,
		object:    Object{Kind: q.Kind, Name: q.Name, Group: q.Group},
		uids:      uids,
		filter:    q.Filter,
		cluster:   q.Cluster,
		chunkSize: b.chunkSize,
	}
}

// Story merges the object's live Events and history as the terminal does,
// asks the cluster which of the objects exist and, with Tree, adds the
// Events of what they own.
func (b *webBackend) Story(ctx context.Context, q web.Query) (*web.Story, error) {
	story := &web.Story{Query: q, Objects: []web.Object{}}
	src := b.sources(q, nil)
	// The two lists and the lookup at once: the page waits for the
	// slowest, not for their sum.
	var (
		live, history               []historyv1alpha1.EventRecord
		liveVersion, historyVersion string
		liveErr, historyErr         error
		roots                       []web.Object
		lookupErr                   error
		wg                          sync.WaitGroup
	)
	// One cluster's story (cluster=) is history's alone, as --cluster
	// reads it: the live Events and the objects this kubeconfig reaches
	// are the server's own cluster's, whichever that is.
	clustered := q.Cluster != ""
	wg.Add(1)
	go func() {
		defer wg.Done()
		historyVersion, historyErr = src.listHistory(ctx, func(r historyv1alpha1.EventRecord) { history = append(history, r) })
	}()
	if !clustered {
		wg.Add(2)
		go func() {
			defer wg.Done()
			liveVersion, liveErr = src.listLive(ctx, func(r historyv1alpha1.EventRecord) { live = append(live, r) })
		}()
		go func() {
			defer wg.Done()
			roots, lookupErr = b.lookup(ctx, q)
		}()
	} else {
		lookupErr = fmt.Errorf("the objects of cluster %s are not read: this kubeconfig reaches the server's cluster, not its fleet's members", q.Cluster)
	}
	wg.Wait()
	if liveErr != nil {
		// A user who may not list Events here sees the API's own answer.
		return nil, liveErr
	}
	tl := timeline.New()
	add := func(r historyv1alpha1.EventRecord) { tl.Add(r) }
	for _, r := range live {
		add(r)
	}
	story.LiveResourceVersion = liveVersion
	if _, ok := historyUnavailable(historyErr, src.namespace); ok && clustered {
		// No live Events can stand in for one cluster's history.
		return nil, historyErr
	} else if reason, ok := historyUnavailable(historyErr, src.namespace); ok {
		story.History.Reason = reason + ": showing live Events only, without those of deleted objects or past the Events' TTL"
	} else if historyErr != nil {
		return nil, historyErr
	} else {
		story.History.Available = true
		story.ResourceVersion = historyVersion
		for _, r := range history {
			add(r)
		}
	}
	if lookupErr != nil {
		story.Lookup.Reason = lookupErr.Error()
	} else {
		story.Lookup.Available = true
		story.Objects = append(story.Objects, roots...)
	}
	story.Followed = fmt.Sprintf("%s/%s", q.Kind, q.Name)
	if q.Tree && story.Lookup.Available {
		owned, tree := b.tree(ctx, roots)
		story.Tree = tree
		story.Objects = append(story.Objects, owned...)
		if err := b.listOwned(ctx, q, owned, story.History.Available, add); err != nil {
			return nil, err
		}
		if len(owned) > 0 {
			if story.History.Available {
				story.Followed += fmt.Sprintf(" and the %d objects it owns", len(owned))
			} else {
				story.Followed += " only: without history, the objects it owns are listed once, not followed"
			}
		}
	}

	records := tl.Records(q.Filter)
	if len(records) > maxPageRecords {
		story.Dropped = len(records) - maxPageRecords
		records = records[story.Dropped:]
	}
	story.Records = make([]web.Record, len(records))
	for i := range records {
		story.Records[i] = web.NewRecord(&records[i])
	}
	return story, nil
}

// listOwned adds the Events of the objects the tree found: from history
// by sets of uids where it is installed (it serves `in`), else from the
// live API one uid at a time (kube-apiserver serves no set selectors).
func (b *webBackend) listOwned(ctx context.Context, q web.Query, owned []web.Object, history bool, add func(historyv1alpha1.EventRecord)) error {
	var mu sync.Mutex
	locked := func(r historyv1alpha1.EventRecord) {
		mu.Lock()
		defer mu.Unlock()
		add(r)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, uids := range ownedBatches(owned, history) {
		g.Go(func() error {
			src := b.sources(web.Query{Namespace: q.Namespace, All: q.All, Filter: q.Filter}, uids)
			var err error
			if history {
				_, err = src.listHistory(ctx, locked)
			} else {
				_, err = src.listLive(ctx, locked)
			}
			return err
		})
	}
	return g.Wait()
}

// ownedBatches are the uids of owned in the sets one selector takes.
func ownedBatches(owned []web.Object, set bool) [][]string {
	size := 1
	if set {
		size = maxSetValues
	}
	var batches [][]string
	for i := 0; i < len(owned); i += size {
		var uids []string
		for _, o := range owned[i:min(i+size, len(owned))] {
			uids = append(uids, o.UID)
		}
		batches = append(batches, uids)
	}
	return batches
}

// Follow runs the terminal's -w followers: the live Events of the object,
// where a new Event shows as soon as it is written, and where history is
// installed its feed too, which also says when each Event ended (and which
// capture delivers up to its batch interval later; the page keeps each
// version once), with a feed follower per set of owned uids. History's
// cursor is one sequence whatever the selector, so all its followers start
// from the story's.
func (b *webBackend) Follow(ctx context.Context, f web.Follow, emit func(web.Record) error) error {
	var mu sync.Mutex
	send := func(r historyv1alpha1.EventRecord) error {
		if !f.Query.Filter.Match(&r) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		return emit(web.NewRecord(&r))
	}
	type run struct {
		follower
		from string
	}
	root := b.sources(f.Query, nil)
	var runs []run
	if f.Query.Cluster == "" {
		runs = append(runs, run{&liveFollower{events: root.events, selector: root.liveSelector()}, f.LiveResourceVersion})
	}
	if f.History {
		runs = append(runs, run{&historyFollower{history: root.history, selector: root.historySelector()}, f.ResourceVersion})
		objects := make([]web.Object, len(f.Owned))
		for i, uid := range f.Owned {
			objects[i] = web.Object{UID: uid}
		}
		for _, uids := range ownedBatches(objects, true) {
			owned := b.sources(f.Query, uids)
			runs = append(runs, run{&historyFollower{history: owned.history, selector: owned.historySelector()}, f.ResourceVersion})
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range runs {
		g.Go(func() error { return r.follow(ctx, r.from, send) })
	}
	return g.Wait()
}

// webOptions adds the page's clients to the terminal timeline's: metadata
// to find which objects exist and what they own, dynamic to read an
// owner's selector.
func (f *Flags) webOptions(config *rest.Config, mapper meta.RESTMapper, events corev1client.EventsGetter, history historyclient.HistoryV1alpha1Interface) (*webOptions, error) {
	metadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dynamicClient, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &webOptions{
		port:    f.WebPort,
		browser: f.Browser,
		backend: &webBackend{
			events: events, history: history, metadata: metadataClient, dynamic: dynamicClient,
			mapper: mapper, chunkSize: f.ChunkSize,
		},
	}, nil
}

// serveWeb serves the page until ctx ends (Ctrl-C), as `kubectl proxy`
// serves until then.
func (o *Options) serveWeb(ctx context.Context) error {
	config := web.Config{
		Query: web.Query{
			Group: o.Object.Group, Kind: o.Object.Kind, Name: o.Object.Name,
			Namespace: o.Namespace, All: o.AllNamespaces, Tree: true,
			Cluster: o.sources.cluster,
		},
		Types: o.Filter.Types,
		Watch: o.Watch,
	}
	if !o.Filter.Since.IsZero() {
		config.Since = o.Filter.Since.UnixMilli()
	}
	server, err := web.Listen(o.web.port, o.web.backend, config)
	if err != nil {
		return err
	}
	url := server.URL()
	what := "the timeline of " + o.Object.String()
	switch {
	case o.Object.Kind != "":
	case o.AllNamespaces:
		what = "every namespace's Events over time"
	default:
		what = fmt.Sprintf("namespace %s's Events over time", o.Namespace)
	}
	fmt.Fprintf(o.Out, "Serving %s on 127.0.0.1 only, with your kubeconfig's identity; open it at\n    %s\nPress Ctrl-C to stop.\n", what, url)
	if o.web.browser {
		cleanup, err := openBrowser(url)
		if err != nil {
			fmt.Fprintf(o.ErrOut, "Not opening a browser (%v): open the URL above.\n", err)
		}
		defer cleanup()
	}
	return server.Serve(ctx)
}
