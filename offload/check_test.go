package offload

import (
	"testing"
)

// TestCheckIncremental: Manager.Check verifies a manager that changed and
// skips one that did not (so damage done behind the methods' backs goes
// unseen until the next change or CheckFull); Coordinator.CheckFull sees
// it at once.
func TestCheckIncremental(t *testing.T) {
	m := NewManager(ManagerConfig{Medium: MediumCPU, NumBlocks: 4, Eviction: EvictionLRU})
	plan, ok := m.PrepareStore(hs(hA, hB))
	if !ok {
		t.Fatal("PrepareStore refused")
	}
	m.CompleteStore(plan.Hashes, true)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	// Damage: a ready block marked pinned while it sits in the LRU list.
	s, _ := m.slotOf(hA)
	m.pins[s] = 1
	if err := m.Check(); err != nil {
		t.Fatalf("Check of an unchanged manager: %v (want the shortcut)", err)
	}
	if err := m.CheckFull(); err == nil {
		t.Fatal("CheckFull missed the damage")
	}
	m.Touch(hs(hB)) // a change: the next Check verifies
	if err := m.Check(); err == nil {
		t.Fatal("Check after a change missed the damage")
	}
	m.pins[s] = 0

	h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
	a := h.newReq(1, tokens(1, 17))
	h.admit(a)
	h.compute(a, 17)
	h.check("computed")
	mt := h.c.Manager(0)
	st, _ := mt.slotOf(a.hashes[0])
	saved := mt.pins[st]
	mt.pins[st] = 5
	if err := h.c.Check(); err != nil {
		t.Fatalf("incremental Check of an unchanged coordinator: %v", err)
	}
	if err := h.c.CheckFull(); err == nil {
		t.Fatal("Coordinator.CheckFull missed a damaged tier")
	}
	mt.pins[st] = saved
	h.finish(a)
	h.storeAll()
	h.check("stored")
	if err := h.c.CheckFull(); err != nil {
		t.Fatal(err)
	}
}
