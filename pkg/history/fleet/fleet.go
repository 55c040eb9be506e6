// Package fleet captures the Events of a fleet's member clusters into one
// history store: one capture.KubernetesSource per member, each with its own
// queue, cursor, relist, loss accounting and metrics, started and stopped as
// members come and go, without a restart.
//
// Members are kubeconfig Secrets in one namespace of the hub's own cluster,
// labelled MemberLabel=<cluster name>, the kubeconfig under KubeconfigKey:
// the form Argo CD's cluster Secrets and Karmada's Secret-backed Cluster
// credentials take, which any GitOps tool and External Secrets can write, and
// which needs no CRD of ours. Clusterpedia's PediaCluster and OCM's
// ManagedCluster are custom resources of those projects (and reference, or
// are served beside, such Secrets): taking them would tie the hub to their
// controllers; docs/fleet.md says how they compare. The hub's RBAC over the
// namespace's Secrets is who may add a cluster.
//
// One member never holds up another or the hub: each capture runs on its
// own goroutines and client (one HTTP/2 connection, one watch of all
// namespaces' Events), and the hub's readiness asks only that the member
// Secrets were read, never that a member answers: a member down is a lag,
// in its own metrics, not an outage of the hub.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
)

const (
	// MemberLabel marks a Secret of the fleet namespace as a member cluster;
	// its value is the cluster's name (a DNS label), as eventrecords show it.
	MemberLabel = "history.eventapiserver.io/cluster"
	// KubeconfigKey is the Secret's key holding the member's kubeconfig: its
	// current context is used. Its credentials need list and watch on Events
	// in all namespaces, nothing else.
	KubeconfigKey = "kubeconfig"
	// ProgressKeyPrefix, then the cluster's name, is a member's progress
	// key: a member removed and added again resumes from its cursor.
	ProgressKeyPrefix = capture.KubernetesProgressKey + "/cluster/"
	// SourcePrefix, then the cluster's name, is a member's source label on
	// the capture metrics (history.SourceLabel).
	SourcePrefix = "cluster/"
)

// Config of a Fleet.
type Config struct {
	// Client reads the member Secrets of Namespace in the hub's cluster.
	Client    kubernetes.Interface
	Namespace string
	// Own is the hub's own cluster name, which no member may take.
	Own string
	// MaxMembers bounds the members captured at once; Secrets past it (by
	// cluster name) are logged and left out.
	MaxMembers int
	// MaxQueueBytes bounds each member's queue (capture.Config).
	MaxQueueBytes int64
	// BehindTimeout is capture.KubernetesConfig's, for every member.
	BehindTimeout time.Duration
	// QPS and Burst bound each member client's requests (a watch is one).
	QPS   float32
	Burst int
}

// Fleet runs the captures of the member clusters.
type Fleet struct {
	cfg     Config
	synced  chan struct{}
	trigger chan struct{}

	mu      sync.Mutex
	members map[string]*member
}

// member is one running capture.
type member struct {
	// secret identifies the configuration it runs with: the Secret's
	// namespace/name and resourceVersion.
	secret string
	cancel context.CancelFunc
	done   chan struct{}
}

func New(cfg Config) *Fleet {
	return &Fleet{cfg: cfg, synced: make(chan struct{}), trigger: make(chan struct{}, 1), members: map[string]*member{}}
}

// ValidateName checks a member's cluster name: a DNS label, as the hub's own
// (--history-cluster-name).
func ValidateName(name string) []string { return validation.IsDNS1123Label(name) }

// Run follows the member Secrets and runs one capture per member into
// captureConfig's store until ctx ends, then stops them all.
func (f *Fleet) Run(ctx context.Context, captureConfig capture.Config) {
	// Only the member Secrets: the namespace may hold others, and the hub
	// keeps no copy of them.
	factory := informers.NewSharedInformerFactoryWithOptions(f.cfg.Client, 0, informers.WithNamespace(f.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = MemberLabel }))
	secrets := factory.Core().V1().Secrets()
	informer := secrets.Informer()
	// Only the Secrets' data matters, and only the newest: one pending
	// reconcile stands for any number of changes.
	poke := func(any) {
		select {
		case f.trigger <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		klog.ErrorS(err, "Cannot follow the fleet's member Secrets")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	klog.InfoS("Following the fleet's member clusters", "namespace", f.cfg.Namespace, "label", MemberLabel)
	close(f.synced)
	defer f.stopAll()
	for {
		list, err := secrets.Lister().List(labels.Everything())
		if err != nil {
			klog.ErrorS(err, "Listing the fleet's member Secrets")
		} else {
			f.reconcile(ctx, captureConfig, list)
		}
		select {
		case <-ctx.Done():
			return
		case <-f.trigger:
		}
	}
}

// desired is a member as its Secret describes it.
type desired struct {
	secret     string
	kubeconfig []byte
}

// reconcile starts, restarts and stops captures so that one runs per valid
// member Secret.
func (f *Fleet) reconcile(ctx context.Context, captureConfig capture.Config, secrets []*corev1.Secret) {
	want := f.desired(secrets)
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, m := range f.members {
		if d, ok := want[name]; !ok || d.secret != m.secret {
			// Waited for before a new capture of the name starts: its
			// metrics series are the new one's.
			m.cancel()
			<-m.done
			delete(f.members, name)
			klog.InfoS("Stopped capturing a member cluster", "cluster", name)
		}
	}
	for name, d := range want {
		if _, ok := f.members[name]; ok {
			continue
		}
		m, err := f.start(ctx, captureConfig, name, d)
		if err != nil {
			klog.ErrorS(err, "Cannot capture a member cluster; fix its Secret", "cluster", name, "secret", d.secret)
			continue
		}
		f.members[name] = m
		klog.InfoS("Capturing a member cluster", "cluster", name, "secret", d.secret)
	}
}

// desired reads the member Secrets: one per cluster name (the first by
// Secret name when several claim one), valid names only, at most MaxMembers.
func (f *Fleet) desired(secrets []*corev1.Secret) map[string]desired {
	slices.SortFunc(secrets, func(a, b *corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	want := map[string]desired{}
	var names []string
	for _, s := range secrets {
		name := s.Labels[MemberLabel]
		id := s.Namespace + "/" + s.Name
		switch {
		case len(ValidateName(name)) > 0:
			klog.ErrorS(nil, "Member Secret's cluster name is not a DNS label; left out", "secret", id, "cluster", name)
			continue
		case name == f.cfg.Own:
			klog.ErrorS(nil, "Member Secret names the hub's own cluster (--history-cluster-name); left out", "secret", id, "cluster", name)
			continue
		case len(s.Data[KubeconfigKey]) == 0:
			klog.ErrorS(nil, "Member Secret has no kubeconfig; left out", "secret", id, "key", KubeconfigKey)
			continue
		}
		if d, ok := want[name]; ok {
			klog.ErrorS(nil, "Two member Secrets name one cluster; the first is captured", "cluster", name, "captured", d.secret, "secret", id)
			continue
		}
		want[name] = desired{secret: id + "@" + s.ResourceVersion, kubeconfig: s.Data[KubeconfigKey]}
		names = append(names, name)
	}
	if f.cfg.MaxMembers > 0 && len(names) > f.cfg.MaxMembers {
		slices.Sort(names)
		for _, name := range names[f.cfg.MaxMembers:] {
			klog.ErrorS(nil, "More member clusters than --history-fleet-max-members; left out", "cluster", name, "max", f.cfg.MaxMembers)
			delete(want, name)
		}
	}
	return want
}

// start runs the capture of one member.
func (f *Fleet) start(ctx context.Context, captureConfig capture.Config, name string, d desired) (*member, error) {
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(d.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading its kubeconfig: %w", err)
	}
	// Protobuf costs the member's kube-apiserver less to encode for its one
	// watch than JSON; the limits keep relists and checks from bursting.
	restConfig.ContentType = runtime.ContentTypeProtobuf
	restConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	restConfig.QPS, restConfig.Burst = f.cfg.QPS, f.cfg.Burst
	restConfig.UserAgent = "event-apiserver-fleet/" + name
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("its client: %w", err)
	}
	source := capture.NewKubernetesSource(capture.KubernetesConfig{
		Name:          SourcePrefix + name,
		ProgressKey:   ProgressKeyPrefix + name,
		Client:        client,
		BehindTimeout: f.cfg.BehindTimeout,
	})
	cfg := captureConfig
	cfg.Cluster = name
	if f.cfg.MaxQueueBytes > 0 {
		cfg.MaxQueueBytes = f.cfg.MaxQueueBytes
	}
	c := capture.New(source, cfg)
	ctx, cancel := context.WithCancel(ctx)
	m := &member{secret: d.secret, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		c.Run(ctx)
	}()
	return m, nil
}

func (f *Fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, m := range f.members {
		m.cancel()
		<-m.done
		delete(f.members, name)
	}
}

// Members returns the names of the member clusters being captured.
func (f *Fleet) Members() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.members))
	for name := range f.members {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ReadyzCheck is the hub's readiness as far as the fleet goes: the member
// Secrets were read. No member's capture is part of it: one member down
// must not take the hub out of its Service, where it serves every other
// member's history.
func (f *Fleet) ReadyzCheck() readyzCheck { return readyzCheck{f} }

type readyzCheck struct{ f *Fleet }

func (readyzCheck) Name() string { return "event-history-fleet" }

func (r readyzCheck) Check(*http.Request) error {
	select {
	case <-r.f.synced:
		return nil
	default:
		return errors.New("the fleet's member Secrets have not been read yet")
	}
}
