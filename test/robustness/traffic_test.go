package robustness

// Seeded client traffic: writers (creates, recorder-style PATCH series,
// updates, deletes; what they leave expires by TTL), a lister (consistent
// and resourceVersion=0 LISTs, with paging) and informer-style watchers,
// all with raw HTTP requests so that every status, Retry-After and duration
// is recorded as the client saw it.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
	"github.com/eventapiserver/event-apiserver/test/robustness/checker"
)

var (
	namespaces = []string{"ns-0", "ns-1", "ns-2"}
	reasons    = []string{"BackOff", "Pulled", "Scheduled"}
)

// replicaClient sends requests to one replica with its admin token.
type replicaClient struct {
	base  string
	token string
	http  *http.Client
}

func newReplicaClient(t *testing.T, s *framework.Server) *replicaClient {
	config := s.Config(t)
	pool := x509.NewCertPool()
	ca := config.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA in the server's kubeconfig")
	}
	return &replicaClient{base: config.Host, token: config.BearerToken,
		http: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}}
}

// apiObject reads an Event, an EventList or a Status.
type apiObject struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name            string `json:"name"`
			Namespace       string `json:"namespace"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"items"`
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Count   int    `json:"count"`
}

func (o *apiObject) rv() int64 {
	n, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	return n
}

type traffic struct {
	t       *testing.T
	c       *cluster
	clients []*replicaClient

	mu  sync.Mutex
	ops []checker.Op
}

func newTraffic(t *testing.T, c *cluster) *traffic {
	tr := &traffic{t: t, c: c}
	for _, s := range c.servers {
		tr.clients = append(tr.clients, newReplicaClient(t, s))
	}
	return tr
}

// do sends one request to replica and fills op's outcome; the object is
// decoded on success.
func (tr *traffic) do(replica int, method, path, contentType string, body []byte, op *checker.Op) *apiObject {
	c := tr.clients[replica]
	// The client waits well past the request timeout, so that a hang shows
	// as a long request, not as a client timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*requestTimeout)
	defer cancel()
	op.Replica = replica
	if op.Start.IsZero() {
		op.Start = time.Now()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		tr.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		op.End, op.Code, op.Message = time.Now(), 0, err.Error()
		return nil
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	op.End, op.Code = time.Now(), resp.StatusCode
	op.RetryAfter = resp.Header.Get("Retry-After")
	if err != nil {
		op.Code, op.Message = 0, "reading the answer: "+err.Error()
		return nil
	}
	var obj apiObject
	if err := json.Unmarshal(data, &obj); err != nil {
		if op.Code < 300 {
			op.Code = 0
		}
		op.Message = fmt.Sprintf("not JSON: %.200q", data)
		return nil
	}
	if op.Code >= 300 {
		op.Reason, op.Message = obj.Reason, obj.Message
		return nil
	}
	return &obj
}

func (tr *traffic) keep(op checker.Op) {
	tr.mu.Lock()
	op.ID = len(tr.ops) + 1
	tr.ops = append(tr.ops, op)
	tr.mu.Unlock()
}

func eventsPath(namespace string) string {
	if namespace == "" {
		return "/api/v1/events"
	}
	return "/api/v1/namespaces/" + namespace + "/events"
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// writer creates Events and writes to the ones it made until ctx ends.
func (tr *traffic) writer(ctx context.Context, id int, rng *rand.Rand) {
	var live []string
	count := map[string]int{}
	for n := 0; ctx.Err() == nil; n++ {
		pause(ctx, time.Duration(60+rng.IntN(120))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		replica := rng.IntN(len(tr.clients))
		x := rng.IntN(100)
		if x < 35 || len(live) == 0 {
			ns := namespaces[rng.IntN(len(namespaces))]
			name := fmt.Sprintf("w%d-%06d", id, n)
			typ := "Normal"
			if rng.IntN(10) < 3 {
				typ = "Warning"
			}
			now := time.Now().UTC().Format(time.RFC3339)
			body, _ := json.Marshal(map[string]any{
				"metadata":       map[string]any{"name": name, "namespace": ns},
				"involvedObject": map[string]any{"kind": "Pod", "name": "pod-" + name, "namespace": ns, "apiVersion": "v1"},
				"reason":         reasons[rng.IntN(len(reasons))], "type": typ, "message": "created",
				"count": 1, "firstTimestamp": now, "lastTimestamp": now,
				"source": map[string]any{"component": "robustness", "host": fmt.Sprintf("writer-%d", id)},
			})
			op := checker.Op{Kind: checker.Create, Key: ns + "/" + name}
			if obj := tr.do(replica, http.MethodPost, eventsPath(ns), "application/json", body, &op); obj != nil {
				op.RV = obj.rv()
				live = append(live, op.Key)
				count[op.Key] = 1
				if len(live) > 20 {
					live = live[1:] // left to expire
				}
			}
			tr.keep(op)
			continue
		}
		i := rng.IntN(len(live))
		key := live[i]
		ns, name, _ := strings.Cut(key, "/")
		path := eventsPath(ns) + "/" + name
		switch {
		case x < 75:
			// A recorder's series: count and lastTimestamp, by strategic
			// merge patch.
			count[key]++
			body, _ := json.Marshal(map[string]any{"count": count[key], "message": fmt.Sprintf("seen %d times", count[key]),
				"lastTimestamp": time.Now().UTC().Format(time.RFC3339)})
			op := checker.Op{Kind: checker.Patch, Key: key}
			if obj := tr.do(replica, http.MethodPatch, path, "application/strategic-merge-patch+json", body, &op); obj != nil {
				op.RV = obj.rv()
			}
			tr.keep(op)
		case x < 87:
			get := checker.Op{Kind: checker.Get, Key: key}
			raw := tr.getRaw(replica, path, &get)
			tr.keep(get)
			if raw == nil {
				continue
			}
			count[key]++
			raw["message"] = fmt.Sprintf("updated, %d", count[key])
			raw["count"] = count[key]
			body, _ := json.Marshal(raw)
			op := checker.Op{Kind: checker.Update, Key: key}
			if obj := tr.do(replica, http.MethodPut, path, "application/json", body, &op); obj != nil {
				op.RV = obj.rv()
			}
			tr.keep(op)
		default:
			op := checker.Op{Kind: checker.Del, Key: key}
			tr.do(replica, http.MethodDelete, path, "", nil, &op)
			tr.keep(op)
			live = append(live[:i], live[i+1:]...)
		}
	}
}

// getRaw is a GET whose object is kept whole, for an update.
func (tr *traffic) getRaw(replica int, path string, op *checker.Op) map[string]any {
	c := tr.clients[replica]
	ctx, cancel := context.WithTimeout(context.Background(), 3*requestTimeout)
	defer cancel()
	op.Replica, op.Start = replica, time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		op.End, op.Message = time.Now(), err.Error()
		return nil
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	op.End, op.Code, op.RetryAfter = time.Now(), resp.StatusCode, resp.Header.Get("Retry-After")
	var obj map[string]any
	if err != nil || json.Unmarshal(data, &obj) != nil {
		op.Code, op.Message = 0, fmt.Sprintf("reading the answer: %v %.200q", err, data)
		return nil
	}
	if op.Code != http.StatusOK {
		op.Reason, _ = obj["reason"].(string)
		op.Message, _ = obj["message"].(string)
		return nil
	}
	return obj
}

// list is one LIST, all its pages, recorded as one operation.
func (tr *traffic) list(replica int, namespace string, selector map[string]string, consistent bool, limit int) checker.Op {
	op := checker.Op{Kind: checker.List, Namespace: namespace, Selector: selector, Consistent: consistent, Items: map[string]int64{}}
	q := url.Values{}
	if !consistent {
		q.Set("resourceVersion", "0")
	}
	if len(selector) > 0 {
		q.Set("fieldSelector", fieldSelector(selector))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	for {
		page := op
		obj := tr.do(replica, http.MethodGet, eventsPath(namespace)+"?"+q.Encode(), "", nil, &page)
		op.End, op.Code, op.Reason, op.Message, op.RetryAfter, op.Replica = page.End, page.Code, page.Reason, page.Message, page.RetryAfter, page.Replica
		if op.Start.IsZero() {
			op.Start = page.Start
		}
		if obj == nil {
			return op
		}
		op.Pages++
		if op.Pages == 1 {
			op.RV = obj.rv()
		}
		for _, it := range obj.Items {
			rv, _ := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64)
			op.Items[it.Metadata.Namespace+"/"+it.Metadata.Name] = rv
		}
		if obj.Metadata.Continue == "" {
			return op
		}
		q.Set("continue", obj.Metadata.Continue)
	}
}

func fieldSelector(selector map[string]string) string {
	var parts []string
	for k, v := range selector {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// lister LISTs until ctx ends: consistent LISTs paged, across namespaces or
// in one with a field selector, and resourceVersion=0 LISTs.
func (tr *traffic) lister(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		pause(ctx, time.Duration(500+rng.IntN(1000))*time.Millisecond)
		replica := rng.IntN(len(tr.clients))
		switch rng.IntN(3) {
		case 0:
			tr.keep(tr.list(replica, "", nil, true, 10+rng.IntN(40)))
		case 1:
			tr.keep(tr.list(replica, namespaces[rng.IntN(len(namespaces))], map[string]string{"type": "Warning"}, true, 5+rng.IntN(10)))
		default:
			tr.keep(tr.list(replica, "", nil, false, 0))
		}
	}
}

// watcher is one informer-style watcher: it LISTs, watches from the
// LIST's resourceVersion with bookmarks, resumes on a random replica from
// the last resourceVersion it received after every disconnect, and LISTs
// again after a 410.
type watcher struct {
	tr  *traffic
	rec checker.Watcher
	// awayUntil, when set, makes the watcher stay away now and then (up to
	// 100s, never past awayUntil's end) between sessions, as a client cut
	// off for a while: its resume may then fall behind the watch cache's
	// window and a compaction, the path to etcd's history and to 410.
	awayUntil context.Context
	mu        sync.Mutex
	pos       int64
}

func (w *watcher) position() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pos
}

func (w *watcher) run(ctx context.Context, rng *rand.Rand) {
	relist := true
	var pos int64
	// recent are resourceVersions received lately: now and then the
	// watcher resumes from one of them instead of the last, and must get
	// exactly what followed it again.
	var recent []int64
	for ctx.Err() == nil {
		replica := rng.IntN(len(w.tr.clients))
		relisted, rewound := false, false
		from := pos
		if relist {
			op := w.tr.list(replica, w.rec.Namespace, w.rec.Selector, true, 0)
			w.tr.keep(op)
			if op.Code != http.StatusOK {
				pause(ctx, time.Duration(200+rng.IntN(300))*time.Millisecond)
				continue
			}
			pos, relist, relisted = op.RV, false, len(w.rec.Sessions) > 0
			from, recent = pos, []int64{pos}
			w.mu.Lock()
			w.pos = pos
			w.mu.Unlock()
			replica = rng.IntN(len(w.tr.clients))
		} else if len(recent) > 1 && rng.IntN(8) == 0 {
			if earlier := recent[rng.IntN(len(recent)-1)]; earlier < pos {
				from, rewound = earlier, true
			}
		}
		s := w.session(ctx, replica, from, time.Duration(5+rng.IntN(11))*time.Second)
		s.Relisted, s.Rewound = relisted, rewound
		pos = from
		w.rec.Sessions = append(w.rec.Sessions, s)
		for _, e := range s.Events {
			if e.Type != checker.Error && e.RV > pos {
				pos = e.RV
				recent = append(recent, pos)
			}
		}
		if len(recent) > 50 {
			recent = recent[len(recent)-50:]
		}
		w.mu.Lock()
		w.pos = pos
		w.mu.Unlock()
		if s.Code == http.StatusGone || (len(s.Events) > 0 && s.Events[len(s.Events)-1].Code == http.StatusGone) {
			relist = true
		}
		if s.Code != http.StatusOK {
			pause(ctx, time.Duration(200+rng.IntN(300))*time.Millisecond)
		}
		if w.awayUntil != nil && rng.IntN(4) == 0 {
			pause(w.awayUntil, time.Duration(10+rng.IntN(90))*time.Second)
		}
	}
}

// session is one watch request, read until the server ends it or ctx ends.
func (w *watcher) session(ctx context.Context, replica int, from int64, timeout time.Duration) checker.Session {
	c := w.tr.clients[replica]
	s := checker.Session{Replica: replica, StartRV: from, Start: time.Now()}
	q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {strconv.FormatInt(from, 10)},
		"timeoutSeconds": {strconv.Itoa(int(timeout.Seconds()))}}
	if len(w.rec.Selector) > 0 {
		q.Set("fieldSelector", fieldSelector(w.rec.Selector))
	}
	// Past the server's own timeout: a stream that stays silent longer is
	// cut here (the session simply ends; the next resumes).
	sctx, cancel := context.WithTimeout(ctx, timeout+20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, c.base+eventsPath(w.rec.Namespace)+"?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		s.End, s.Message = time.Now(), err.Error()
		return s
	}
	defer func() { _ = resp.Body.Close() }()
	s.Code, s.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusOK {
		var st apiObject
		data, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(data, &st)
		s.End, s.Reason, s.Message = time.Now(), st.Reason, st.Message
		return s
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var e struct {
			Type   string    `json:"type"`
			Object apiObject `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			break
		}
		ev := checker.Event{Type: checker.EventType(e.Type), RV: e.Object.rv(), At: time.Now(),
			Key: e.Object.Metadata.Namespace + "/" + e.Object.Metadata.Name}
		if ev.Type == checker.Error {
			ev.Code, ev.Reason, ev.Key = e.Object.Code, e.Object.Reason, ""
		}
		if ev.Type == checker.Bookmark {
			ev.Key = ""
		}
		s.Events = append(s.Events, ev)
		if ev.Type == checker.Error {
			break
		}
	}
	s.End = time.Now()
	return s
}

// historyRelistLog is what capture logs when etcd compacted past its
// revision and versions replaced meanwhile are lost.
const historyRelistLog = "etcd compacted past the Event history capture's revision"

// history reads every record a replica's Event history holds.
func (tr *traffic) history(replica int) (checker.HistoryStore, error) {
	store := checker.HistoryStore{Replica: replica, Relisted: tr.c.servers[replica].LogContains(historyRelistLog)}
	if tr.c.historyStore == "postgres" {
		// One store for all: a relist by any replica may have lost
		// versions in it.
		for _, s := range tr.c.servers {
			store.Relisted = store.Relisted || s.LogContains(historyRelistLog)
		}
	}
	q := url.Values{"limit": {"500"}}
	for pages := 0; pages < 10000; pages++ {
		c := tr.clients[replica]
		ctx, cancel := context.WithTimeout(context.Background(), 3*requestTimeout)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/apis/history.eventapiserver.io/v1alpha1/eventrecords?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Accept", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			cancel()
			return store, err
		}
		var list struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []struct {
				Event struct {
					Metadata struct {
						Name            string `json:"name"`
						Namespace       string `json:"namespace"`
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				} `json:"event"`
			} `json:"items"`
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(data, &list) != nil {
			return store, fmt.Errorf("listing replica %d's eventrecords: %d %v %.300s", replica, resp.StatusCode, err, data)
		}
		for _, it := range list.Items {
			rv, _ := strconv.ParseInt(it.Event.Metadata.ResourceVersion, 10, 64)
			store.Records = append(store.Records, checker.HistoryRecord{Key: it.Event.Metadata.Namespace + "/" + it.Event.Metadata.Name, RV: rv})
		}
		if list.Metadata.Continue == "" {
			return store, nil
		}
		q.Set("continue", list.Metadata.Continue)
	}
	return store, fmt.Errorf("replica %d's eventrecords: more than 10000 pages", replica)
}
