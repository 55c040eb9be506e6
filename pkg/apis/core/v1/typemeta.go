package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
)

// Convert_v1_TypeMeta_To_v1_TypeMeta leaves apiVersion and kind behind, like
// metav1's own conversion, which kube-apiserver's generated conversions use:
// the scheme sets them on external objects, and internal ones carry none.
// conversion-gen cannot take metav1 as a peer here (see update-codegen.sh),
// so the drop is declared in this peer package instead.
//
// +k8s:conversion-fn=drop
func Convert_v1_TypeMeta_To_v1_TypeMeta(in, out *metav1.TypeMeta, s conversion.Scope) error {
	return nil
}
