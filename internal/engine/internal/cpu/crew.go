package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The crew: GOMAXPROCS−1 goroutines that take blocks of a matmul beside
// the caller and stay awake, polling, for a while after their last work.
// A goroutine started per matmul (or one asleep) reaches another core
// only after the core is woken: about 200 µs on the 2-vCPU VMs this
// project measures on, as long as a whole decode-step matmul, so the
// second core hardly ever helped (one core decoded as fast as two). An
// awake member takes a job in well under a microsecond. Which goroutine
// computes a block changes no bits: every block's sums have one order.
var crew struct {
	start   sync.Once
	members int
	// busy admits one job at a time; a caller that finds it held (two
	// sessions at once) runs its job alone.
	busy     sync.Mutex
	job      atomic.Pointer[crewJob]
	seq      atomic.Uint64 // bumped after each job is published
	sleepers atomic.Int32
	wake     chan struct{}
}

// awake is how long a member polls for the next job before it sleeps:
// longer than the gaps between a decode step's matmuls and between the
// steps of a generation, short enough that an idle engine idles.
const awake = 3 * time.Millisecond

// crewJob is blocks 0..n−1 of fn, each worker with its own scratch of at
// least size floats and tiles tiles.
type crewJob struct {
	n, size, tiles int
	fn             func(blk int, sc *scratch)
	next, done     atomic.Int64
}

// run takes the job's next block until none is left.
func (j *crewJob) run(sc *scratch) {
	if len(sc.w) < j.size {
		sc.w = make([]float32, j.size)
	}
	if len(sc.acc) < j.tiles {
		sc.acc = make([][16][lanes]float32, j.tiles)
	}
	for {
		blk := int(j.next.Add(1) - 1)
		if blk >= j.n {
			return
		}
		j.fn(blk, sc)
		j.done.Add(1)
	}
}

// member is one crew goroutine, for the life of the process.
func member() {
	var sc scratch
	seen := crew.seq.Load()
	for {
		s := waitJob(seen)
		seen = s
		crew.job.Load().run(&sc)
	}
}

// waitJob returns the job sequence number once it is past seen: polling
// for awake, then asleep until a caller wakes the member.
func waitJob(seen uint64) uint64 {
	deadline := time.Now().Add(awake)
	for i := 0; ; i++ {
		if s := crew.seq.Load(); s != seen {
			return s
		}
		if i%256 != 255 {
			continue
		}
		// Other goroutines get the core between polls.
		runtime.Gosched()
		if time.Now().Before(deadline) {
			continue
		}
		crew.sleepers.Add(1)
		if crew.seq.Load() == seen {
			<-crew.wake
		}
		crew.sleepers.Add(-1)
		deadline = time.Now().Add(awake)
	}
}

// scratchPool holds the callers' scratch between jobs (a member keeps
// its own).
var scratchPool sync.Pool

// parallelBlocks runs fn on blocks 0..n−1 on the caller and, when shared
// is set, the crew, each taking the next block when it is free (a core
// slowed by other work takes fewer) and holding its own scratch of at
// least size floats and tiles tiles. Unshared, the caller runs them all:
// work too small to be worth another core.
func parallelBlocks(n int, shared bool, size, tiles int, fn func(blk int, sc *scratch)) {
	j := &crewJob{n: n, size: size, tiles: tiles, fn: fn}
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer scratchPool.Put(sc)
	if !shared || n <= 1 || runtime.GOMAXPROCS(0) == 1 || !crew.busy.TryLock() {
		j.run(sc)
		return
	}
	defer crew.busy.Unlock()
	crew.start.Do(func() {
		crew.members = runtime.GOMAXPROCS(0) - 1
		crew.wake = make(chan struct{}, crew.members)
		for range crew.members {
			go member()
		}
	})
	crew.job.Store(j)
	crew.seq.Add(1)
	for range crew.sleepers.Load() {
		select {
		case crew.wake <- struct{}{}:
		default:
		}
	}
	j.run(sc)
	// The last blocks are in the members' hands: each is short.
	for i := 0; j.done.Load() < int64(n); i++ {
		if i%256 == 255 {
			runtime.Gosched()
		}
	}
}

// parallel runs fn over [0,n) in contiguous chunks of at least grain items
// on the caller and the crew.
func parallel(n, grain int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+grain-1)/grain)
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	parallelBlocks((n+chunk-1)/chunk, true, 0, 0, func(c int, _ *scratch) {
		fn(c*chunk, min(n, (c+1)*chunk))
	})
}
