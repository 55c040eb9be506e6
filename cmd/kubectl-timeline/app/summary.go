package app

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

const summaryExample = `  # Which reasons rose this week in the current namespace: a bar per reason, a sparkline per day
  kubectl timeline summary --since=168h --bucket=24h

  # Warnings per namespace across the cluster over the last day, hourly, as JSON
  kubectl timeline summary -A --by=metadata.namespace --field-selector=type=Warning -o json

  # On a fleet's hub: member cluster eu-west-1's reasons over the last day
  kubectl timeline summary -A --cluster=eu-west-1`

// SummaryFlags is what the user typed after `kubectl timeline summary`.
type SummaryFlags struct {
	ConfigFlags *genericclioptions.ConfigFlags
	PrintFlags  *genericclioptions.PrintFlags

	AllNamespaces bool
	Since         time.Duration
	Bucket        time.Duration
	By            []string
	FieldSelector string
	Cluster       string
	Top           int32

	genericiooptions.IOStreams
}

// newSummaryCommand is `kubectl timeline summary`; it shares the parent's
// kubeconfig flags.
func newSummaryCommand(config *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := &SummaryFlags{
		ConfigFlags: config,
		PrintFlags:  genericclioptions.NewPrintFlags("").WithTypeSetter(timeline.Scheme),
		Since:       24 * time.Hour,
		Bucket:      time.Hour,
		By:          []string{"reason"},
		Top:         10,
		IOStreams:   streams,
	}
	cmd := &cobra.Command{
		Use:   "summary [-n NAMESPACE | -A] [--cluster=NAME] [--since=DURATION] [--bucket=DURATION] [--by=reason] [--field-selector=SELECTOR] [-o json|yaml]",
		Short: "Count Events over time by reason (or other fields), drawn with bars",
		Long: `Count the Event versions history kept over the window, by reason (or one or two of type,
regarding.kind, metadata.namespace, reportingController, regarding.name, cluster), counted by
the server (history.eventapiserver.io eventrecordcounts, clustereventrecordcounts with -A): a bar
per group for its total and a sparkline of its counts per bucket, oldest to newest.`,
		Example:               summaryExample,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions()
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.PrintFlags.AddFlags(cmd)
	cmd.Flags().BoolVarP(&f.AllNamespaces, "all-namespaces", "A", f.AllNamespaces, "Count across every namespace (needs list on eventrecords across namespaces). Namespace in current context is ignored even if specified with --namespace.")
	cmd.Flags().DurationVar(&f.Since, "since", f.Since, "Count the Events last seen within this duration before now.")
	cmd.Flags().DurationVar(&f.Bucket, "bucket", f.Bucket, "The length of one time bucket of the sparkline (buckets start on multiples of it since the Unix epoch).")
	cmd.Flags().StringSliceVar(&f.By, "by", f.By, "One or two fields to group by: reason, type, regarding.kind, metadata.namespace, reportingController, regarding.name, cluster.")
	cmd.Flags().StringVar(&f.FieldSelector, "field-selector", f.FieldSelector, "Count only the Events this eventrecords field selector selects (e.g. type=Warning,regarding.kind=Pod).")
	cmd.Flags().StringVar(&f.Cluster, "cluster", f.Cluster, "Count only the Events of this cluster (the field selector cluster=NAME): a member of a fleet's hub, or the server's own cluster (its --history-cluster-name).")
	cmd.Flags().Int32Var(&f.Top, "top", f.Top, "Show the largest this many groups; the rest are counted as other.")
	return cmd
}

// SummaryOptions is what Run needs, resolved from SummaryFlags.
type SummaryOptions struct {
	Namespace string
	Spec      historyv1alpha1.EventRecordCountSpec

	client  historyclient.HistoryV1alpha1Interface
	printer printers.ResourcePrinter
	genericiooptions.IOStreams
}

// ToOptions resolves the namespace, the client and the printer.
func (f *SummaryFlags) ToOptions() (*SummaryOptions, error) {
	if f.Since <= 0 {
		return nil, fmt.Errorf("--since must be positive: %s", f.Since)
	}
	o := &SummaryOptions{IOStreams: f.IOStreams, Spec: historyv1alpha1.EventRecordCountSpec{
		GroupBy:    f.By,
		BucketSize: metav1.Duration{Duration: f.Bucket},
		Top:        f.Top,
	}}
	var err error
	if o.Spec.FieldSelector, err = f.fieldSelector(); err != nil {
		return nil, err
	}
	if !f.AllNamespaces {
		if o.Namespace, _, err = f.ConfigFlags.ToRawKubeConfigLoader().Namespace(); err != nil {
			return nil, err
		}
	}
	config, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if o.client, err = historyclient.NewForConfig(config); err != nil {
		return nil, err
	}
	if *f.PrintFlags.OutputFormat != "" {
		if o.printer, err = f.PrintFlags.ToPrinter(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// fieldSelector is the user's selector, then --cluster's and the window's
// own labels: after the user's, so that the flags say where the window
// starts and which cluster is counted.
func (f *SummaryFlags) fieldSelector() (string, error) {
	selector := []string{}
	if f.FieldSelector != "" {
		selector = append(selector, f.FieldSelector)
	}
	if f.Cluster != "" {
		if err := validCluster(f.Cluster); err != nil {
			return "", err
		}
		selector = append(selector, clusterSelector(f.Cluster).String())
	}
	return strings.Join(append(selector, "since="+f.Since.String()), ","), nil
}

// Run asks the server and prints its answer.
func (o *SummaryOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var obj runtime.Object
	var status historyv1alpha1.EventRecordCountStatus
	if o.Namespace == "" {
		got, err := o.client.ClusterEventRecordCounts().Create(ctx, &historyv1alpha1.ClusterEventRecordCount{Spec: o.Spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got.TypeMeta = metav1.TypeMeta{APIVersion: historyv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterEventRecordCount"}
		obj, status = got, got.Status
	} else {
		got, err := o.client.EventRecordCounts(o.Namespace).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: o.Spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got.TypeMeta = metav1.TypeMeta{APIVersion: historyv1alpha1.SchemeGroupVersion.String(), Kind: "EventRecordCount"}
		obj, status = got, got.Status
	}
	if o.printer != nil {
		return o.printer.PrintObj(obj, o.Out)
	}
	if status.Total == 0 {
		fmt.Fprintf(o.ErrOut, "No events found from %s to %s.\n", status.Since.Format(time.RFC3339), status.Until.Format(time.RFC3339))
		return nil
	}
	return printSummary(o.Out, o.Spec.GroupBy, status)
}

// barWidth is the longest bar, the largest group's.
const barWidth = 40

// printSummary draws a row per group: its values, its total, a bar to
// scale with the largest group's, and a sparkline of its buckets.
func printSummary(out io.Writer, groupBy []string, status historyv1alpha1.EventRecordCountStatus) error {
	w := printers.GetNewTabWriter(out)
	var header []string
	for _, g := range groupBy {
		header = append(header, strings.ToUpper(g))
	}
	fmt.Fprintf(w, "%s\tCOUNT\t\tOVER TIME (%s to %s)\n", strings.Join(header, "\t"),
		status.Since.UTC().Format("2006-01-02T15:04Z"), status.Until.UTC().Format("2006-01-02T15:04Z"))
	var largest int64
	for _, g := range status.Groups {
		largest = max(largest, g.Total)
	}
	for i, g := range status.Groups {
		series := make([]int64, len(status.Buckets))
		for j, b := range status.Buckets {
			series[j] = b.Counts[i]
		}
		values := make([]string, len(g.Values))
		for j, v := range g.Values {
			values[j] = v
			if v == "" {
				values[j] = "<none>"
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", strings.Join(values, "\t"), g.Total, bar(g.Total, largest, barWidth), sparkline(series))
	}
	if status.Other > 0 {
		fmt.Fprintf(w, "(other)%s\t%d\t%s\t\n", strings.Repeat("\t", len(groupBy)-1), status.Other, bar(status.Other, largest, barWidth))
	}
	return w.Flush()
}

// bar draws n of largest in width cells, to an eighth of a cell.
func bar(n, largest int64, width int) string {
	if largest <= 0 || n <= 0 {
		return ""
	}
	eighths := int(math.Round(float64(n) * float64(width*8) / float64(largest)))
	eighths = max(eighths, 1)
	partial := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	return strings.Repeat("█", eighths/8) + partial[eighths%8]
}

// sparkline draws each count as one of eight heights, scaled to the
// largest; an empty bucket is a space, so that none reads as a few.
func sparkline(series []int64) string {
	levels := []rune("▁▂▃▄▅▆▇█")
	var largest int64
	for _, n := range series {
		largest = max(largest, n)
	}
	var b strings.Builder
	for _, n := range series {
		if n == 0 || largest == 0 {
			b.WriteRune(' ')
			continue
		}
		i := int(math.Ceil(float64(n)*float64(len(levels))/float64(largest))) - 1
		b.WriteRune(levels[max(0, min(i, len(levels)-1))])
	}
	return b.String()
}
