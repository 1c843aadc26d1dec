// Import: create :Local nodes under their :Global, while this import's mark stands ($token).
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
MATCH (g:Global {id: row.global_id})
CREATE (g)-[:HAS_LOCAL]->(l:Local)
SET l = row
RETURN count(l) AS n
