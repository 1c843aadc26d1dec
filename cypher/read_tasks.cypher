MATCH (t:Task) RETURN properties(t) AS p ORDER BY t.id
