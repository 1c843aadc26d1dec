// Begin an import under the memory's write lock: when the memory is empty and nothing is
// unfinished, mark the import pending (every command refuses the memory until
// import_finish clears the mark). Each batch carries $token: a reset replaces the mark
// and so stops an import that still runs. Returns what was there before.
MERGE (m:MemoryState {id: 'memory'})
SET m.writes = coalesce(m.writes, 0) + 1
WITH m, m.pending AS pending, m.pending_since AS since, m.pending_source AS source
CALL () { MATCH (n:Global) RETURN count(n) AS globals }
CALL () { MATCH (n:Local) RETURN count(n) AS locals }
CALL () { MATCH (n:Task) RETURN count(n) AS tasks }
CALL () { MATCH (n:Run) RETURN count(n) AS runs }
CALL () { MATCH (n:Step) RETURN count(n) AS steps }
WITH m, pending, since, source, globals + locals + tasks + runs + steps AS records
CALL (m, pending, records) {
  WITH m WHERE pending IS NULL AND records = 0
  SET m.pending = 'import', m.token = $token, m.pending_since = $since, m.pending_source = $source
}
RETURN pending, since, source, records
