package engine

// requestSlots is the size of the direct-mapped part of Core.byID
// (idtable): the core numbers requests in sequence, so the live ones mostly
// hold distinct slots, and the lookup of every step outcome (Complete)
// costs an index and a compare instead of a map access.
const requestSlots = 1024
