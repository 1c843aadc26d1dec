// Import: create :Task nodes as exported, while this import's mark stands ($token).
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
CREATE (t:Task)
SET t = row
RETURN count(t) AS n
