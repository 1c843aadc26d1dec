// :Step records and their links: run (HAS_STEP), chosen global and local (when the
// method chose them), and NEXT to their neighbours in the run (either may be written
// first, e.g. on import). Used per step by the step transaction (after step_claim) and
// in batches by import.
UNWIND $rows AS row
MATCH (r:Run {id: row.run_id})
OPTIONAL MATCH (g:Global {id: row.global_id})
OPTIONAL MATCH (l:Local {id: row.local_id})
MERGE (s:Step {id: row.id})
SET s += row
MERGE (r)-[:HAS_STEP]->(s)
FOREACH (x IN CASE WHEN g IS NULL THEN [] ELSE [g] END | MERGE (s)-[:CHOSE_GLOBAL]->(x))
FOREACH (x IN CASE WHEN l IS NULL THEN [] ELSE [l] END | MERGE (s)-[:CHOSE_LOCAL]->(x))
WITH s
OPTIONAL MATCH (prev:Step {run_id: s.run_id, index: s.index - 1})
OPTIONAL MATCH (next:Step {run_id: s.run_id, index: s.index + 1})
FOREACH (p IN CASE WHEN prev IS NULL THEN [] ELSE [prev] END | MERGE (p)-[:NEXT]->(s))
FOREACH (q IN CASE WHEN next IS NULL THEN [] ELSE [next] END | MERGE (s)-[:NEXT]->(q))
RETURN count(s) AS n
