package watchresume

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// forwarder relays a watch: first the given events, then those of src that
// keep accepts. Stop, or src closing its channel, ends it and closes ours.
type forwarder struct {
	src    watch.Interface
	result chan watch.Event
	done   chan struct{}
	once   sync.Once
}

func forward(src watch.Interface, first []watch.Event, keep func(watch.Event) bool) watch.Interface {
	f := &forwarder{src: src, result: make(chan watch.Event), done: make(chan struct{})}
	go f.run(first, func(event watch.Event) (bool, bool) { return keep(event), false })
	return f
}

// forwardUntil relays src's events that decide keeps, and ends the watch
// (closes its channel) at the first that decide ends.
func forwardUntil(src watch.Interface, decide func(watch.Event) (keep, end bool)) watch.Interface {
	f := &forwarder{src: src, result: make(chan watch.Event), done: make(chan struct{})}
	go f.run(nil, decide)
	return f
}

func (f *forwarder) run(first []watch.Event, decide func(watch.Event) (keep, end bool)) {
	defer close(f.result)
	defer f.src.Stop()
	for _, event := range first {
		if !f.send(event) {
			return
		}
	}
	for {
		select {
		case event, ok := <-f.src.ResultChan():
			if !ok {
				return
			}
			keep, end := decide(event)
			if end || keep && !f.send(event) {
				return
			}
		case <-f.done:
			return
		}
	}
}

func (f *forwarder) send(event watch.Event) bool {
	select {
	case f.result <- event:
		return true
	case <-f.done:
		return false
	}
}

func (f *forwarder) ResultChan() <-chan watch.Event { return f.result }

func (f *forwarder) Stop() {
	f.once.Do(func() { close(f.done) })
}

func keepAll(watch.Event) bool { return true }
