package llama

// Task is work split into independent units: Do(worker, i) computes unit i
// using worker's scratch. Units write disjoint outputs and each is one
// fixed-order computation, so their results do not depend on which worker
// runs them or in what order.
type Task interface {
	Do(worker, i int)
}

// Runner runs the units of a task, perhaps in parallel. It is how an edge
// lends the executor its goroutines: this package starts none.
type Runner interface {
	// Workers is the number of distinct worker numbers Run passes to Do.
	Workers() int
	// Run calls t.Do(w, i) once for every i in [0, n), with 0 ≤ w <
	// Workers() and no two concurrent calls sharing a w, and returns when
	// every call has returned.
	Run(n int, t Task)
}

// Serial is the Runner that runs every unit in order on the caller's
// goroutine.
type Serial struct{}

// Workers is 1.
func (Serial) Workers() int { return 1 }

// Run calls t.Do(0, i) for i = 0..n-1.
func (Serial) Run(n int, t Task) {
	for i := 0; i < n; i++ {
		t.Do(0, i)
	}
}
