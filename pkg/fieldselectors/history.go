package fieldselectors

// EventsV1Label returns the internal field an events.k8s.io/v1 field label
// means, so that other resources showing Events (history's EventRecords)
// accept exactly the labels events.k8s.io/v1 does.
func EventsV1Label(label string) (string, bool) {
	internal, ok := eventsV1Labels[label]
	return internal, ok
}

// PlainFields returns the plain internal fields a requirement on the internal
// label reads: the label itself, or the parts of an OR field.
func PlainFields(label string) []string {
	return consults(label)
}
