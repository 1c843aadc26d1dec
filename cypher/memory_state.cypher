// The import or reset that began and has not finished, if any (every command checks).
OPTIONAL MATCH (m:MemoryState {id: 'memory'})
RETURN m.pending AS pending, m.pending_since AS since, m.pending_source AS source
