package validation

import (
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standardFinalizers are the finalizer names kube-apiserver accepts without a
// domain prefix (core "kubernetes" plus the two garbage-collector ones).
var standardFinalizers = sets.New(
	"kubernetes",
	metav1.FinalizerOrphanDependents,
	metav1.FinalizerDeleteDependents,
)

// validateObjectMeta is kube-apiserver's core ValidateObjectMeta as the
// events.k8s.io/v1 path calls it: namespaced, the name an RFC 1123 subdomain,
// and the core group's extra finalizer rule on top of apimachinery's checks.
func validateObjectMeta(meta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(meta, true, apimachineryvalidation.NameIsDNSSubdomain, fldPath)
	return append(allErrs, validateFinalizerNames(meta.Finalizers, fldPath.Child("finalizers"))...)
}

func validateObjectMetaUpdate(newMeta, oldMeta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, fldPath)
	return append(allErrs, validateFinalizerNames(newMeta.Finalizers, fldPath.Child("finalizers"))...)
}

// validateFinalizerNames rejects an unprefixed finalizer that is not one of
// the standard ones; apimachinery alone accepts any qualified name.
func validateFinalizerNames(finalizers []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, name := range finalizers {
		if !strings.Contains(name, "/") && !standardFinalizers.Has(name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return allErrs
}
