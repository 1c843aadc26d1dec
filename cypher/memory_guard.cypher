// First statement of seeding and of starting a run: take the memory's write lock (an
// import begins under the same lock, so its emptiness check sees every committed write)
// and return the unfinished import or reset, if any, for the caller to refuse.
MERGE (m:MemoryState {id: 'memory'})
SET m.writes = coalesce(m.writes, 0) + 1
RETURN m.pending AS pending, m.pending_since AS since, m.pending_source AS source
