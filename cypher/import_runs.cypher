// Import: create :Run nodes on their :Task, while this import's mark stands ($token).
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
MATCH (t:Task {id: row.task_id})
CREATE (r:Run)-[:ON_TASK]->(t)
SET r = row
RETURN count(r) AS n
