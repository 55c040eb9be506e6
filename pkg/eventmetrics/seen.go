package eventmetrics

import "hash/maphash"

// seenGeneration is how many Events one generation of seenCounts holds;
// the two hold at most twice that, about 36 bytes each (a uid's 64-bit
// hash and a count, in maps grown as they fill): 2.3 MiB when full
// (TestMemoryPerSeries).
const seenGeneration = 1 << 15

// seenCounts remembers the occurrences of the Events capture has seen, by
// uid, so that a change counts the rise since the version seen before. It
// is bounded without a list: entries go to the newer of two maps, and when
// that one is full the older is dropped whole and the newer takes its
// place. An Event that keeps changing stays; one quiet for a generation is
// forgotten. A uid is kept as its hash under a per-process seed, which no
// writer can aim a collision at.
type seenCounts struct {
	seed         maphash.Seed
	newer, older map[uint64]int32
}

func newSeenCounts() seenCounts {
	return seenCounts{seed: maphash.MakeSeed(), newer: map[uint64]int32{}, older: map[uint64]int32{}}
}

// swap remembers n for uid and returns what was remembered before.
func (s *seenCounts) swap(uid string, n int32) (int32, bool) {
	h := maphash.String(s.seed, uid)
	prev, ok := s.newer[h]
	if !ok {
		prev, ok = s.older[h]
		if len(s.newer) >= seenGeneration {
			s.older, s.newer = s.newer, make(map[uint64]int32)
		}
	}
	s.newer[h] = n
	return prev, ok
}

func (s *seenCounts) len() int {
	return len(s.newer) + len(s.older)
}
