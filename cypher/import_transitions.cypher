// Import: create TRANSITION edges with their evidence, while this import's mark stands ($token).
MATCH (m:MemoryState {id: 'memory'})
WHERE m.pending = 'import' AND m.token = $token
SET m.writes = m.writes + 1
WITH m
UNWIND $rows AS row
MATCH (a:Global {id: row.source}), (b:Global {id: row.target})
CREATE (a)-[e:TRANSITION]->(b)
SET e = row.props
RETURN count(e) AS n
