package install_test

import (
	"strconv"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// BenchmarkEventListToV1 prices what a LIST response pays to convert the
// internal EventList to core/v1 on the versioning codec's path (no copy of
// the input), per listed Event: the internal Event has no TypeMeta
// (core.Event.GetObjectKind), so the items are converted one by one instead
// of reused in place.
func BenchmarkEventListToV1(b *testing.B) {
	scheme, _ := servedScheme()
	convertor := runtime.UnsafeObjectConvertor(scheme)
	for _, n := range []int{10, 100000} {
		b.Run("items="+strconv.Itoa(n), func(b *testing.B) {
			list := &core.EventList{Items: make([]core.Event, n)}
			for i := range list.Items {
				list.Items[i].ObjectMeta = metav1.ObjectMeta{Namespace: "default", Name: "e" + strconv.Itoa(i)}
				list.Items[i].Reason = "Pulled"
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := convertor.ConvertToVersion(list, k8scorev1.SchemeGroupVersion)
				if err != nil {
					b.Fatal(err)
				}
				if got := len(out.(*k8scorev1.EventList).Items); got != n {
					b.Fatalf("converted %d items, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/item")
		})
	}
}
