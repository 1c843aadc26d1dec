// The :Step records of some runs, in (run, index, id) order. `s.index IS NOT NULL` (always
// true) lets the composite (run_id, index) index find them; without it Neo4j scans every step.
UNWIND $run_ids AS run_id
MATCH (s:Step)
WHERE s.run_id = run_id AND s.index IS NOT NULL
RETURN properties(s) AS p ORDER BY s.run_id, s.index, s.id
