MATCH (g:Global) RETURN properties(g) AS p ORDER BY g.id
