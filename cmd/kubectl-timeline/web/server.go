package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

//go:embed assets
var assets embed.FS

// Backend reads what the page asks for, with the user's identity.
type Backend interface {
	// Story lists the query's Events and the objects they are about.
	Story(ctx context.Context, q Query) (*Story, error)
	// Follow calls emit with each new version of the Events a story
	// showed, until ctx ends.
	Follow(ctx context.Context, f Follow, emit func(Record) error) error
	// Counts is the overview's chart, from the server's counts.
	Counts(ctx context.Context, q CountsQuery) (*Counts, error)
	// Objects are the objects behind one of its segments.
	Objects(ctx context.Context, q ObjectsQuery) (*Objects, error)
	// Clusters are the clusters whose records the user may count.
	Clusters(ctx context.Context, scope Scope, since time.Time) (*Clusters, error)
}

// Follow is what a page follows after its story: the story's query, from
// the cursors the story returned.
type Follow struct {
	Query Query
	// History says the story read history: its feed is followed from
	// ResourceVersion, and the live Events from LiveResourceVersion.
	History             bool
	ResourceVersion     string
	LiveResourceVersion string
	// Owned are the uids of the objects the story's tree found.
	Owned []string
}

// MaxWatches bounds the page's open watches (tabs, reloads): each is a
// watch on the cluster.
const MaxWatches = 8

// MaxOwned bounds the owned objects a watch follows; the backend's tree
// finds at most this many.
const MaxOwned = 64

// Server is the page's HTTP server on the loopback.
type Server struct {
	config   Config
	backend  Backend
	token    string
	listener net.Listener
	hosts    map[string]bool
	watches  chan struct{}
	http     *http.Server
}

// Listen opens 127.0.0.1:port (any free port when 0) and makes the token.
// Nothing else can be chosen: the page reads with the user's credentials,
// so it must not be reachable from another machine.
func Listen(port int, backend Backend, config Config) (*Server, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("--web-port must be between 0 and 65535, got %d", port)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	bound := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	s := &Server{
		config:   config,
		backend:  backend,
		token:    base64.RawURLEncoding.EncodeToString(secret),
		listener: l,
		hosts:    map[string]bool{"127.0.0.1:" + bound: true, "localhost:" + bound: true},
		watches:  make(chan struct{}, MaxWatches),
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// URL is the page's address, token included.
func (s *Server) URL() string {
	return "http://" + s.listener.Addr().String() + "/" + s.token + "/"
}

// Serve answers until ctx ends, then closes the listener and the page's
// watches.
func (s *Server) Serve(ctx context.Context) error {
	s.http.BaseContext = func(net.Listener) context.Context { return ctx }
	errs := make(chan error, 1)
	go func() { errs <- s.http.Serve(s.listener) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Open watches end with ctx (the BaseContext), so Shutdown does not
	// wait on them.
	if err := s.http.Shutdown(shutdown); err != nil {
		return s.http.Close()
	}
	return nil
}

// securityHeaders go on every answer, refusals included.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	rest, ok := s.authorized(r)
	if !ok {
		http.Error(w, "403 Forbidden: this page needs the URL kubectl timeline --web printed, token included", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	switch rest {
	case "api/config":
		writeJSON(w, http.StatusOK, s.config)
	case "api/story":
		s.story(w, r)
	case "api/watch":
		s.watch(w, r)
	case "api/counts":
		s.counts(w, r)
	case "api/objects":
		s.objects(w, r)
	case "api/clusters":
		s.clusters(w, r)
	case "":
		s.asset(w, "index.html")
	default:
		s.asset(w, rest)
	}
}

// authorized checks the Host and the token, and returns the path after the
// token.
func (s *Server) authorized(r *http.Request) (string, bool) {
	if !s.hosts[r.Host] {
		return "", false
	}
	first, rest, found := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !found || subtle.ConstantTimeCompare([]byte(first), []byte(s.token)) != 1 {
		return "", false
	}
	return rest, true
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func (s *Server) asset(w http.ResponseWriter, name string) {
	contentType, known := contentTypes[path.Ext(name)]
	body, err := fs.ReadFile(assets, "assets/"+name)
	if !known || err != nil || strings.Contains(name, "..") {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write(body)
}

// maxQueryName bounds a name or kind in a query: a DNS subdomain.
const maxQueryName = 253

// parseQuery reads the story asked for. The page may ask for any object
// (a lane's owner, a drill-down): the cluster decides what the user may
// read.
func parseQuery(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{
		Group: v.Get("group"), Kind: v.Get("kind"), Name: v.Get("name"), Namespace: v.Get("namespace"),
		All: v.Get("allNamespaces") == "true", Tree: v.Get("tree") == "true", Cluster: v.Get("cluster"),
	}
	if q.Kind == "" || q.Name == "" {
		return q, errors.New("kind and name are required")
	}
	for _, s := range []string{q.Group, q.Kind, q.Name, q.Namespace} {
		if len(s) > maxQueryName {
			return q, fmt.Errorf("%q is longer than %d bytes", s[:32]+"...", maxQueryName)
		}
	}
	if !q.All && q.Namespace == "" {
		return q, errors.New("namespace is required unless allNamespaces=true")
	}
	if q.Cluster != "" {
		if errs := validation.IsDNS1123Label(q.Cluster); len(errs) > 0 {
			return q, fmt.Errorf("cluster %q: %s", q.Cluster, errs[0])
		}
	}
	if since := v.Get("since"); since != "" {
		ms, err := strconv.ParseInt(since, 10, 64)
		if err != nil || ms < 0 {
			return q, fmt.Errorf("since must be Unix milliseconds, got %q", since)
		}
		q.Filter.Since = time.UnixMilli(ms)
	}
	if types := v.Get("types"); types != "" {
		for _, t := range strings.Split(types, ",") {
			if t != "Normal" && t != "Warning" {
				return q, errors.New("valid types are Normal or Warning")
			}
			q.Filter.Types = append(q.Filter.Types, t)
		}
	}
	return q, nil
}

func (s *Server) story(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	story, err := s.backend.Story(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, story)
}

// watch streams the story's new Event versions as server-sent events: an
// event "record" per version, and "failure" with a Status when the watch
// ends in an error (410 Gone, a revoked permission). The page reloads the
// story after either a failure or a dropped connection, so nothing
// between is lost.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	v := r.URL.Query()
	follow := Follow{
		Query: q, History: v.Get("history") == "true",
		ResourceVersion: v.Get("resourceVersion"), LiveResourceVersion: v.Get("liveResourceVersion"),
	}
	if o := v.Get("owned"); o != "" {
		follow.Owned = strings.Split(o, ",")
	}
	if len(follow.Owned) > MaxOwned {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("at most %d owned objects are followed, got %d", MaxOwned, len(follow.Owned))))
		return
	}
	for _, uid := range follow.Owned {
		// They go into a set selector, `regarding.uid in (...)`, which
		// has no escaping: a uid is what the API server makes, a UUID.
		if !validUID(uid) {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("owned: %q is not a uid", uid)))
			return
		}
	}
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		writeError(w, apierrors.NewTooManyRequests(fmt.Sprintf("at most %d pages may follow Events at once", MaxWatches), 5))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, apierrors.NewInternalError(errors.New("streaming unsupported")))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	// A comment first, so the page knows the stream is open.
	fmt.Fprint(w, ": following\n\n")
	flusher.Flush()
	err = s.backend.Follow(r.Context(), follow, func(rec Record) error {
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: record\ndata: %s\n\n", data); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	})
	if err != nil && r.Context().Err() == nil {
		data, _ := json.Marshal(statusOf(err))
		fmt.Fprintf(w, "event: failure\ndata: %s\n\n", data)
		flusher.Flush()
	}
}

// validUID accepts what the API server's uids are made of.
func validUID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// statusOf is err as the API would say it: its own Status where the
// cluster answered, else 502 (the cluster could not be reached or its
// answer read).
func statusOf(err error) metav1.Status {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		return status.Status()
	}
	return metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonUnknown, Code: http.StatusBadGateway,
	}
}

// writeError answers with the error's Status and its code: a 403 from the
// cluster reaches the page as the cluster's own 403 and message.
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	klog.V(4).InfoS("Page request failed", "code", status.Code, "message", status.Message)
	writeJSON(w, int(status.Code), status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
