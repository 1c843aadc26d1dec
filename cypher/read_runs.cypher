MATCH (r:Run) RETURN properties(r) AS p ORDER BY r.id
