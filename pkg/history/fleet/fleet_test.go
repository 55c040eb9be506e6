package fleet

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDesired: which member Secrets become captures: one per valid cluster
// name other than the hub's own, with a kubeconfig, the first Secret by name
// when two claim one cluster, at most MaxMembers by cluster name.
func TestDesired(t *testing.T) {
	secret := func(name, cluster string, kubeconfig bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, ResourceVersion: "7",
			Labels: map[string]string{MemberLabel: cluster}}}
		if kubeconfig {
			s.Data = map[string][]byte{KubeconfigKey: []byte("kubeconfig of " + name)}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		max     int
		secrets []*corev1.Secret
		want    []string
	}{
		{name: "members", max: 10, secrets: []*corev1.Secret{secret("s-b", "b", true), secret("s-c", "c", true)},
			want: []string{"b=fleet/s-b@7", "c=fleet/s-c@7"}},
		{name: "not a DNS label", max: 10, secrets: []*corev1.Secret{secret("s-b", "B_1", true), secret("s-c", "", true)}},
		{name: "the hub's own name", max: 10, secrets: []*corev1.Secret{secret("s-a", "a", true)}},
		{name: "no kubeconfig", max: 10, secrets: []*corev1.Secret{secret("s-b", "b", false)}},
		{name: "two Secrets for one cluster", max: 10, secrets: []*corev1.Secret{secret("s-2", "b", true), secret("s-1", "b", true)},
			want: []string{"b=fleet/s-1@7"}},
		{name: "more than the most members", max: 2,
			secrets: []*corev1.Secret{secret("s-d", "d", true), secret("s-b", "b", true), secret("s-c", "c", true)},
			want:    []string{"b=fleet/s-b@7", "c=fleet/s-c@7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Config{Own: "a", MaxMembers: tc.max})
			var got []string
			for name, d := range f.desired(tc.secrets) {
				got = append(got, fmt.Sprintf("%s=%s", name, d.secret))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("members %v, want %v", got, tc.want)
			}
		})
	}
}
