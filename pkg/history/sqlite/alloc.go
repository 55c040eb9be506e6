package sqlite

import (
	"sync"

	"modernc.org/libc"
)

// pinAllocatorPages keeps one block of each of the C allocator's size classes
// allocated for the life of the process.
//
// modernc.org/sqlite's malloc (modernc.org/memory) carves each size class
// out of 64 KiB mmap'ed pages and unmaps a page as soon as its last block is
// freed. SQLite's B-tree balance allocates and frees a scratch buffer of up
// to 16 KiB on every page split, usually the only block of its class: each
// split paid an mmap and an munmap, which was most of capture's CPU (the
// syscalls and page faults of BenchmarkWrite's profile). A block that is
// never freed keeps one page of each class mapped, so those buffers reuse
// it; the cost is at most one page (64 KiB of address space, touched only
// where used) per class.
var pinAllocatorPages = sync.OnceFunc(func() {
	tls := libc.NewTLS()
	defer tls.Close()
	// Classes are powers of two from 16 bytes; above 16 KiB each block is
	// an mmap of its own, which no pin can keep.
	for size := 16; size <= 16<<10; size <<= 1 {
		libc.Xmalloc(tls, libc.Tsize_t(size))
	}
})
