// Import: create :Step nodes with their links (run, chosen global and local when the step
// has them, NEXT to their neighbours in the run, whichever of two comes first), while this
// import's mark stands ($token). NEXT is merged: two neighbours in one batch both find each other.
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
MATCH (r:Run {id: row.run_id})
CREATE (r)-[:HAS_STEP]->(s:Step)
SET s = row
WITH s
CALL (s) {
  MATCH (g:Global {id: s.global_id}) // none when the method chose no global
  CREATE (s)-[:CHOSE_GLOBAL]->(g)
}
CALL (s) {
  MATCH (l:Local {id: s.local_id})
  CREATE (s)-[:CHOSE_LOCAL]->(l)
}
CALL (s) {
  MATCH (prev:Step {run_id: s.run_id, index: s.index - 1})
  MERGE (prev)-[:NEXT]->(s)
}
CALL (s) {
  MATCH (next:Step {run_id: s.run_id, index: s.index + 1})
  MERGE (s)-[:NEXT]->(next)
}
RETURN count(s) AS n
