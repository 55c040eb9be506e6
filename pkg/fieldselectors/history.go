package fieldselectors

// EventsV1Label returns the internal field an events.k8s.io/v1 field label
// means, so that other resources showing Events (history's EventRecords)
// accept exactly the labels events.k8s.io/v1 does.
func EventsV1Label(label string) (string, bool) {
	base, set := splitSetLabel(label)
	internal, ok := eventsV1Labels[base]
	return internal + set, ok
}

// PlainFields returns the plain internal fields a requirement on the internal
// label reads: the label itself, or the parts of an OR field.
func PlainFields(label string) []string {
	return consults(label)
}

// FieldLabel returns the field label a requirement's label names, without
// the operator a set-based requirement carries in it (see setselector.go).
func FieldLabel(label string) string {
	base, _ := splitSetLabel(label)
	return base
}
