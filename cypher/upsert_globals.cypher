// Seeding: create or update :Global nodes with the bank's static properties (the runtime
// statistics of existing nodes are kept). Rows come in id order, the order steps lock them.
// $zero_stats: every statistic at zero (the attempts, reward and outcome counters).
UNWIND $rows AS row
MERGE (g:Global {id: row.id})
ON CREATE SET g += $zero_stats, g.trend = 0.0
SET g += row
RETURN count(g) AS n
