// Package app is the kubectl-timeline command, built as kubectl's own
// commands are (k8s.io/kubectl/pkg/cmd/events in particular): Flags hold
// what the user typed, ToOptions turns them into Options, which Validate and
// Run.
package app

import (
	"context"
	goflag "flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

const example = `  # Everything that happened to pod/web-0 in the current namespace, oldest first,
  # across every pod that bore the name (each uid is shown), deleted ones included
  kubectl timeline pod/web-0

  # The last two days of it, then follow new Events as they happen
  kubectl timeline pod/web-0 -n shop --since=48h -w

  # Only Warnings, in every namespace, as an EventRecordList for jq
  kubectl timeline statefulset/db -A --types=Warning -o json

  # What of the last week mentioned x509
  kubectl timeline deployment/ingress --since=168h --search=x509

  # On a fleet's hub: the story of pod/web-0 in member cluster eu-west-1, from history
  kubectl timeline pod/web-0 -n shop --cluster=eu-west-1 -w


  # The same story as a picture in the browser, with what the Deployment owns
  # (its ReplicaSets and their Pods) folded in, following new Events
  kubectl timeline deployment/web -n shop --web -w

  # Counts per reason over the last week, a bar and a daily sparkline each
  kubectl timeline summary --since=168h --bucket=24h

  # The namespace's Events over time as stacked bars in the browser, by reason
  # or type, with a search and a drill-down into each object's story (-A: all)
  kubectl timeline --web -n shop`

// defaultChunkSize is kubectl's (cmdutil.DefaultChunkSize): the page size
// of every list.
const defaultChunkSize = 500

// Flags is what the user typed.
type Flags struct {
	ConfigFlags *genericclioptions.ConfigFlags
	PrintFlags  *genericclioptions.PrintFlags

	AllNamespaces bool
	Watch         bool
	NoHeaders     bool
	Since         time.Duration
	Types         []string
	Search        string
	Cluster       string
	ChunkSize     int64
	Web           bool
	WebPort       int
	Browser       bool

	genericiooptions.IOStreams
}

// NewFlags returns the defaults.
func NewFlags(streams genericiooptions.IOStreams) *Flags {
	return &Flags{
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		PrintFlags:  genericclioptions.NewPrintFlags("").WithTypeSetter(timeline.Scheme),
		ChunkSize:   defaultChunkSize,
		Browser:     true,
		IOStreams:   streams,
	}
}

// NewCommand is `kubectl timeline`.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := NewFlags(streams)
	cmd := &cobra.Command{
		Use:   "timeline [TYPE/NAME | TYPE NAME] [-n NAMESPACE | -A] [--cluster=NAME] [--since=DURATION] [--types=Normal,Warning] [--search=TEXT] [-w] [-o json|yaml|wide | --web]",
		Short: "Show one object's Events over all its incarnations, live and from history, oldest first",
		Long: `Show one object's Events, oldest first, across every object that bore its kind and name
(a pod recreated with the same name has a new uid each time: each uid is shown, deleted ones
included). Live Events (core/v1) are merged with event-apiserver's history
(history.eventapiserver.io eventrecords), each Event once, at its newest version.

Where the server has no history, or you may not read it, this says so on stderr and shows the
live Events.

With --cluster, only the Events of that cluster, from history alone: on a fleet's hub a member's
(or the hub's own), on any other server its own cluster's (its --history-cluster-name, by
default kubernetes). The live Events API serves one cluster and does not say which, so it is
not read; without history, --cluster is an error.

With --web it serves the same story as a page on 127.0.0.1, guarded by a random token in its
URL, prints the URL and opens a browser where there is one; the page reads the cluster with
your kubeconfig's identity, through this process, until Ctrl-C. Without TYPE/NAME, --web serves
the namespace's Events over time instead (every namespace's with -A), from history's counts,
from which each object's story opens.`,
		Example: example,
		// Help and errors say "kubectl timeline", as the user types it.
		Annotations:           map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl timeline"},
		Args:                  cobra.RangeArgs(0, 2),
		DisableFlagsInUseLine: true,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := flags.ToOptions(args)
			if err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	flags.AddFlags(cmd)
	cmd.AddCommand(newSummaryCommand(flags.ConfigFlags, streams))
	return cmd
}

// AddFlags registers the kubeconfig flags every kubectl user knows, the
// output flags, and `kubectl events`' own.
func (f *Flags) AddFlags(cmd *cobra.Command) {
	f.ConfigFlags.AddFlags(cmd.PersistentFlags())
	f.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). Without it, a table; wide adds each Event's name and whether it is still live.",
		strings.Join(append(f.PrintFlags.AllowedFormats(), "wide"), ", "))
	cmd.Flags().BoolVarP(&f.Watch, "watch", "w", f.Watch, "After printing the timeline, follow new Events of the object as they happen. Where history is installed, follow its feed: each Event's end (expiry or delete) shows too, in a STATE column, and a reconnect resumes where it stopped.")
	cmd.Flags().BoolVarP(&f.AllNamespaces, "all-namespaces", "A", f.AllNamespaces, "Look for the object in every namespace. Namespace in current context is ignored even if specified with --namespace.")
	cmd.Flags().DurationVar(&f.Since, "since", f.Since, "Only Events last seen within this duration before now (e.g. 48h, 30m). Default: all that are kept.")
	cmd.Flags().StringSliceVar(&f.Types, "types", f.Types, "Output only events of given types.")
	cmd.Flags().StringVar(&f.Search, "search", f.Search, "Output only Events whose note (message) holds this text, ignoring case; history answers it from its index "+
		"(the field selector note.contains=TEXT). Needs --since, within the server's --history-max-query-window, and three letters or digits in a row.")
	cmd.Flags().StringVar(&f.Cluster, "cluster", f.Cluster, "Only the Events of this cluster, read from history (the field selector cluster=NAME): a member of a fleet's hub, or the server's own cluster (its --history-cluster-name). Reading a member's needs get on its name in the virtual resource clusters.history.eventapiserver.io. With --web, the cluster the page opens on (its picker changes it).")
	cmd.Flags().BoolVar(&f.NoHeaders, "no-headers", f.NoHeaders, "When using the default output format, don't print headers.")
	cmd.Flags().Int64Var(&f.ChunkSize, "chunk-size", f.ChunkSize, "Return large lists in chunks rather than all at once. Pass 0 to disable.")
	cmd.Flags().BoolVar(&f.Web, "web", f.Web, "Serve the timeline as a page in the browser, on 127.0.0.1 only, at a URL with a random token, until Ctrl-C: one lane per incarnation, each Event a mark, a series a bar, zoomable, with a table view; the objects it owns are folded in. With -w the page shows new Events as they happen. "+
		"Without TYPE/NAME, the page shows the namespace's Events over time (every namespace's with -A): stacked bars by reason or type from history's counts, a search of the notes, and from a bar the objects behind it and their stories.")
	cmd.Flags().IntVar(&f.WebPort, "web-port", f.WebPort, "The port on 127.0.0.1 --web serves on. Default: any free port.")
	cmd.Flags().BoolVar(&f.Browser, "browser", f.Browser, "With --web, open the page in the default browser, where there is one (a display, or macOS or Windows). --browser=false only prints its URL.")

	// kubectl's -v, for the requests the plugin sends (-v=6).
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))
}

// Run executes the command and prints its error as kubectl does, returning
// the process's exit code.
// Ctrl-C ends a watch cleanly, as it ends `kubectl events -w`.
func Run(cmd *cobra.Command, errOut io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Reason != "" {
		fmt.Fprintf(errOut, "Error from server (%s): %s\n", status.Status().Reason, status.Status().Message)
	} else {
		fmt.Fprintf(errOut, "error: %v\n", err)
	}
	return 1
}
