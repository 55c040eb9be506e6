package sqlite

import (
	"sync"

	"modernc.org/libc"
)

const (
	// allocPageSize is modernc.org/memory's page: each size class up to a
	// quarter of it is carved out of pages of this size.
	allocPageSize = 64 << 10
	// allocPageHeader is its page header; a page holds
	// (allocPageSize-allocPageHeader)/size blocks of a class.
	allocPageHeader = 32
	// spareBlocks is how many free blocks of each class the pinned pages
	// keep at least.
	spareBlocks = 16
)

// pinAllocatorPages keeps, for each of the C allocator's size classes, pages
// mapped with at least spareBlocks free blocks, for the life of the process.
//
// modernc.org/sqlite's malloc (modernc.org/memory) carves each size class
// out of 64 KiB mmap'ed pages and unmaps a page as soon as its last block is
// freed. SQLite's B-tree balance allocates and frees a scratch buffer of up
// to 16 KiB on every page split, and a statement holds blocks of the same
// classes while it runs (its program and registers): whenever the mapped
// pages of a class were full, a split paid an mmap and an munmap, most of
// capture's CPU in BenchmarkWrite's profile. One block kept in each of a few
// pages keeps those pages mapped and their other blocks free for reuse. The
// cost is a few pages per class (about 1.5 MiB of address space, touched only
// where used).
var pinAllocatorPages = sync.OnceFunc(func() {
	tls := libc.NewTLS()
	defer tls.Close()
	// Classes are powers of two from 16 bytes; above 16 KiB each block is
	// an mmap of its own, which no pin can keep.
	for size := 16; size <= 16<<10; size <<= 1 {
		perPage := (allocPageSize - allocPageHeader) / size
		pages := (spareBlocks + perPage - 2) / (perPage - 1)
		blocks := make([]uintptr, 0, pages*perPage)
		for range pages * perPage {
			blocks = append(blocks, libc.Xmalloc(tls, libc.Tsize_t(size)))
		}
		// Keep the first block of each page; the others go back to the
		// free list of a page that stays mapped.
		kept := map[uintptr]bool{}
		for _, b := range blocks {
			if page := b &^ (allocPageSize - 1); b != 0 && !kept[page] {
				kept[page] = true
				continue
			}
			libc.Xfree(tls, b)
		}
	}
})
