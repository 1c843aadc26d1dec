// Create or update :Local nodes under their parent :Global (HAS_LOCAL).
// Evidence entries are JSON strings, newest first.
UNWIND $rows AS row
MATCH (g:Global {id: row.global_id})
MERGE (l:Local {id: row.id})
ON CREATE SET l.attempts = 0, l.successes = 0, l.reward_sum = 0.0,
              l.compile_failures = 0, l.incorrect = 0, l.positive = [], l.negative = []
SET l += row
MERGE (g)-[:HAS_LOCAL]->(l)
RETURN count(l) AS n
