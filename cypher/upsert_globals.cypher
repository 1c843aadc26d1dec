// Create or update :Global nodes. Seeding passes static properties only (runtime
// statistics of existing nodes are kept); import passes statistics too.
// $zero_stats: every statistic at zero (the attempts, reward and outcome counters).
UNWIND $rows AS row
MERGE (g:Global {id: row.id})
ON CREATE SET g += $zero_stats, g.trend = 0.0
SET g += row
RETURN count(g) AS n
