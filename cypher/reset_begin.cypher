// Begin a reset under the memory's write lock: mark it pending (replacing any unfinished
// import's or reset's mark, which stops an import that still runs), so that a reset cut
// short leaves a memory every command refuses until a reset finishes.
MERGE (m:MemoryState {id: 'memory'})
SET m.writes = coalesce(m.writes, 0) + 1,
    m.pending = 'reset', m.token = $token, m.pending_since = $since, m.pending_source = null
RETURN m.pending AS pending
