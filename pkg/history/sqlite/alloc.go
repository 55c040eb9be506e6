package sqlite

import (
	"encoding/binary"
	"sync"
	"syscall"
	"unsafe"

	"k8s.io/klog/v2"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
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

// setUpMemory configures SQLite's memory once per process, before the first
// connection initializes the library.
var setUpMemory = sync.OnceFunc(func() {
	givePageCachePool()
	pinAllocatorPages()
})

// pageCacheLines is how many database pages the page cache pool holds: the
// writer's cache and maxReaders readers', plus room for the page-sized
// scratch buffers of B-tree balancing.
const pageCacheLines = (writeCacheKiB+maxReaders*readCacheKiB)/4 + 64

// givePageCachePool hands SQLite one pool for every connection's cached pages
// (SQLITE_CONFIG_PAGECACHE), mapped once for the life of the process. The
// whole pool is resident from the first Open on: SQLite links every line
// into its free list when it initializes, writing to each (about 10 MiB at
// pageCacheLines). Without it each 4 KiB page is a malloc of
// about 4.3 KB, which modernc.org/memory serves from its 8 KiB size class;
// once growing caches had taken every free block of that class, the
// page-sized scratch buffer of every B-tree balance mapped a fresh 64 KiB
// page and unmapped it again when freed (a few hundred mmap and munmap calls
// a second under capture, each munmap a TLB shootdown on the other cores;
// BenchmarkWrite/capturecpu shows the difference). Lines beyond the pool fall
// back to malloc.
func givePageCachePool() {
	tls := libc.NewTLS()
	defer tls.Close()
	header := libc.Xmalloc(tls, 4)
	defer libc.Xfree(tls, header)
	if rc := configure(tls, sqlite3.SQLITE_CONFIG_PCACHE_HDRSZ, header); rc != sqlite3.SQLITE_OK {
		klog.InfoS("SQLite page cache pool not configured", "rc", rc)
		return
	}
	// Lines hold a default-size page and SQLite's headers, 8-byte aligned.
	line := (sqlite3.SQLITE_DEFAULT_PAGE_SIZE + int(int32(binary.NativeEndian.Uint32(libc.GoBytes(header, 4)))) + 7) &^ 7
	pool, err := syscall.Mmap(-1, 0, line*pageCacheLines, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		klog.InfoS("SQLite page cache pool not configured", "err", err)
		return
	}
	// SQLITE_MISUSE if the library is already initialized: the pages are
	// then malloc'ed as before.
	if rc := configure(tls, sqlite3.SQLITE_CONFIG_PAGECACHE, uintptr(unsafe.Pointer(&pool[0])), int32(line), int32(pageCacheLines)); rc != sqlite3.SQLITE_OK {
		klog.InfoS("SQLite page cache pool not configured", "rc", rc)
		syscall.Munmap(pool) //nolint:errcheck // only address space
	}
}

// configure calls sqlite3_config(op, args...).
func configure(tls *libc.TLS, op int32, args ...any) int32 {
	va := libc.NewVaList(args...)
	defer libc.Xfree(tls, va)
	return sqlite3.Xsqlite3_config(tls, op, va)
}

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
func pinAllocatorPages() {
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
}
