// Import: create :Global nodes as exported, while this import's mark stands ($token).
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
CREATE (g:Global)
SET g = row
RETURN count(g) AS n
