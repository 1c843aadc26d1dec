// Create or update TRANSITION edges between globals. Seeding passes the static
// knowledge (when, rationale, risks); import passes the evidence too.
UNWIND $rows AS row
MATCH (a:Global {id: row.source}), (b:Global {id: row.target})
MERGE (a)-[e:TRANSITION]->(b)
ON CREATE SET e.n = 0, e.reward_sum = 0.0, e.gain_sum = 0.0, e.successes = 0,
              e.compile_failures = 0, e.incorrect = 0,
              e.n_by_k = $zeros_int, e.reward_by_k = $zeros_float
SET e += row.props
RETURN count(e) AS n
