MATCH (a:Global)-[e:TRANSITION]->(b:Global)
RETURN a.id AS source, b.id AS target, properties(e) AS p ORDER BY source, target
