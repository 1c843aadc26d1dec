// Clear this import's mark (its last write): from now on the memory is complete.
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
REMOVE m.pending, m.token, m.pending_since, m.pending_source
RETURN count(m) AS finished
