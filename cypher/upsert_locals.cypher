// Seeding: create or update :Local nodes under their parent :Global (HAS_LOCAL); their
// statistics and evidence (JSON strings, newest first) are kept. $zero_stats as in upsert_globals.
UNWIND $rows AS row
MATCH (g:Global {id: row.global_id})
MERGE (l:Local {id: row.id})
ON CREATE SET l += $zero_stats, l.positive = [], l.negative = []
SET l += row
MERGE (g)-[:HAS_LOCAL]->(l)
RETURN count(l) AS n
