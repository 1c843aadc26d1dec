// Create or update :Global nodes. Seeding passes static properties only (runtime
// statistics of existing nodes are kept); import passes statistics too.
UNWIND $rows AS row
MERGE (g:Global {id: row.id})
ON CREATE SET g.attempts = 0, g.successes = 0, g.reward_sum = 0.0,
              g.compile_failures = 0, g.incorrect = 0, g.trend = 0.0
SET g += row
RETURN count(g) AS n
