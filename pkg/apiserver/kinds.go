package apiserver

import (
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1alpha1 "k8s.io/api/admissionregistration/v1alpha1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1alpha1 "k8s.io/api/certificates/v1alpha1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta1 "k8s.io/api/flowcontrol/v1beta1"
	flowcontrolv1beta2 "k8s.io/api/flowcontrol/v1beta2"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	imagepolicyv1alpha1 "k8s.io/api/imagepolicy/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	nodev1 "k8s.io/api/node/v1"
	nodev1alpha1 "k8s.io/api/node/v1alpha1"
	nodev1beta1 "k8s.io/api/node/v1beta1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1alpha1 "k8s.io/api/rbac/v1alpha1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	storagev1alpha1 "k8s.io/api/storage/v1alpha1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	storagemigrationv1beta1 "k8s.io/api/storagemigration/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

// addKubeKinds registers every external kind that kube-apiserver v1.36.3's
// scheme knows besides Events (k8s.io/kubernetes
// pkg/controlplane/import_known_versions.go: each group's install package
// registers these k8s.io/api versions; events.k8s.io is ours to install).
//
// The request handlers decode a body with the scheme before they convert
// it to an Event (k8s.io/apiserver endpoints/handlers create.go, update.go,
// and patch.go for a patched kind). kube-apiserver decodes a Pod sent to
// /api/v1/namespaces/x/events, fails to convert it and answers `Pod in
// version "v1" cannot be handled as a Event: converting (v1.Pod) to
// (core.Event): unknown conversion`; a scheme that knew Events only would
// fail one step earlier, with "no kind is registered". Knowing the same
// kinds gives every such body kube-apiserver's answer, whatever the kind,
// version or encoding. Nothing is served or stored in these kinds; the
// only other reader of the scheme's kinds is the OpenAPI namer, which tags
// DeleteOptions and WatchEvent with every group version, as
// kube-apiserver's does.
//
// Two differences remain, in bodies no client sends as an Event. kube-apiserver
// also knows each group's internal kinds (`apiVersion: __internal`), which
// exist only in k8s.io/kubernetes: a body naming one is refused here as not
// registered, where kube-apiserver fails its conversion. And this scheme
// knows history.eventapiserver.io, which kube-apiserver does not: an
// EventRecord sent as an Event fails its conversion here, where
// kube-apiserver finds no such kind.
func addKubeKinds(scheme *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		admissionv1.AddToScheme, admissionv1beta1.AddToScheme,
		admissionregistrationv1.AddToScheme, admissionregistrationv1alpha1.AddToScheme, admissionregistrationv1beta1.AddToScheme,
		apiserverinternalv1alpha1.AddToScheme,
		appsv1.AddToScheme, appsv1beta1.AddToScheme, appsv1beta2.AddToScheme,
		authenticationv1.AddToScheme, authenticationv1alpha1.AddToScheme, authenticationv1beta1.AddToScheme,
		authorizationv1.AddToScheme, authorizationv1beta1.AddToScheme,
		autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		batchv1.AddToScheme, batchv1beta1.AddToScheme,
		certificatesv1.AddToScheme, certificatesv1alpha1.AddToScheme, certificatesv1beta1.AddToScheme,
		coordinationv1.AddToScheme, coordinationv1alpha2.AddToScheme, coordinationv1beta1.AddToScheme,
		corev1.AddToScheme,
		discoveryv1.AddToScheme, discoveryv1beta1.AddToScheme,
		extensionsv1beta1.AddToScheme,
		flowcontrolv1.AddToScheme, flowcontrolv1beta1.AddToScheme, flowcontrolv1beta2.AddToScheme, flowcontrolv1beta3.AddToScheme,
		imagepolicyv1alpha1.AddToScheme,
		networkingv1.AddToScheme, networkingv1beta1.AddToScheme,
		nodev1.AddToScheme, nodev1alpha1.AddToScheme, nodev1beta1.AddToScheme,
		policyv1.AddToScheme, policyv1beta1.AddToScheme,
		rbacv1.AddToScheme, rbacv1alpha1.AddToScheme, rbacv1beta1.AddToScheme,
		resourcev1.AddToScheme, resourcev1alpha3.AddToScheme, resourcev1beta1.AddToScheme, resourcev1beta2.AddToScheme,
		schedulingv1.AddToScheme, schedulingv1alpha2.AddToScheme, schedulingv1beta1.AddToScheme,
		storagev1.AddToScheme, storagev1alpha1.AddToScheme, storagev1beta1.AddToScheme,
		storagemigrationv1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	return nil
}
